//! Control selector keys and their closed label domains (§6.4 table).

use std::sync::OnceLock;

use trellis_graph::{
    ControlSelector, ControlSource, EnumLabel, EnumSet, FieldName, GraphNode, Join,
};

use crate::index::Index;
use crate::nodeset::NodeId;

/// What a control selector reads, with the node resolved to its canonical id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SelKey<'g> {
    pub(crate) node: NodeId,
    pub(crate) source: ControlSource,
    pub(crate) field: Option<&'g FieldName>,
}

/// The runtime error labels of every executable.
pub(crate) const ERROR_LABELS: [&str; 4] = ["timeout", "crash", "malformed", "refusal"];

/// Built-in domains are non-empty literal lists, so `from_labels` always yields a set.
fn labels(list: &[&'static str]) -> Option<EnumSet> {
    let labels: Vec<EnumLabel> = list.iter().map(|l| EnumLabel::from_static(l)).collect();
    EnumSet::from_labels(&labels)
}

macro_rules! static_domain {
    ($fn_name:ident, [$($label:literal),*]) => {
        pub(crate) fn $fn_name() -> Option<&'static EnumSet> {
            static SET: OnceLock<Option<EnumSet>> = OnceLock::new();
            SET.get_or_init(|| labels(&[$($label),*])).as_ref()
        }
    };
}

static_domain!(error_domain, ["timeout", "crash", "malformed", "refusal"]);
static_domain!(terminated_domain, ["converged", "exhausted"]);
static_domain!(overflow_domain, ["ok", "overflow"]);
static_domain!(joined_domain, ["reached", "quorum_unreachable"]);
static_domain!(raced_domain, ["satisfied", "no_satisfier"]);

/// Resolves a selector's node name; `None` when no node has that name.
pub(crate) fn key_of<'g>(index: &Index<'g>, sel: &'g ControlSelector) -> Option<SelKey<'g>> {
    Some(SelKey {
        node: index.lookup(sel.name.as_str())?,
        source: sel.source,
        field: sel.field.as_ref(),
    })
}

/// The closed label set a selector key can take, or `None` when the selector is illegal.
pub(crate) fn domain<'g>(index: &Index<'g>, key: &SelKey<'g>) -> Option<&'g EnumSet> {
    let node = index.node(key.node);
    match (key.source, key.field.map(FieldName::as_str)) {
        (ControlSource::Signal, Some(field)) => match node {
            GraphNode::Verifier(v) => v.signals.get(field),
            _ => None,
        },
        (ControlSource::Error, None) => node.executable().and_then(|_| error_domain()),
        (ControlSource::Group, Some("terminated")) => {
            terminated_domain().filter(|_| matches!(node, GraphNode::Loop(_)))
        }
        (ControlSource::Group, Some("overflow")) => {
            overflow_domain().filter(|_| matches!(node, GraphNode::Map(_)))
        }
        (ControlSource::Group, Some("joined")) => match node {
            GraphNode::Par(p) if !matches!(p.join, Join::First { .. }) => joined_domain(),
            _ => None,
        },
        (ControlSource::Group, Some("raced")) => match node {
            GraphNode::Par(p) if matches!(p.join, Join::First { .. }) => raced_domain(),
            _ => None,
        },
        _ => None,
    }
}

/// True for a `group.joined` or `group.raced` key whose par records that correlation kind.
pub(crate) fn is_correlation_key(index: &Index, key: &SelKey) -> bool {
    key.source == ControlSource::Group
        && matches!(key.field.map(FieldName::as_str), Some("joined" | "raced"))
        && domain(index, key).is_some()
}
