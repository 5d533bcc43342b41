//! Data selectors, bindings, control selectors, guards and par joins.

use serde::Serialize;

use crate::ident::{EnumSet, FieldName, FieldPath, NodeName, PositiveInteger, non_empty_vec};
use crate::json::Json;
use crate::json::{At, Obj, ParseError, array_of, tagged, unknown_variant};

/// Reads the fields of a struct variant of an internally tagged enum: the tag key is allowed,
/// other keys must be among `fields` (which is what serde lists in its message).
pub(crate) fn variant<'a>(obj: &Obj<'a>, tag: &str, fields: &[&str]) -> Result<(), ParseError> {
    for key in obj.map.keys() {
        if key != tag && !fields.contains(&key) {
            let expected = if fields.is_empty() {
                "there are no fields".to_owned()
            } else {
                format!("expected {}", crate::json::one_of(fields))
            };
            return Err(ParseError::new(
                format!("unknown field `{key}`, {expected}"),
                obj.at,
            ));
        }
    }
    Ok(())
}

/// Where a binding reads its value: the enclosing group's state, or the current map item.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum DataSelector {
    State { path: FieldPath },
    Item { path: FieldPath },
}

impl DataSelector {
    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = tagged(value, at, "DataSelector")?;
        let source = obj.tag("source", "DataSelector")?;
        variant(&obj, "source", &["path"])?;
        let path = FieldPath::read(obj.required("path")?, &obj.path("path"))?;
        match source {
            "state" => Ok(Self::State { path }),
            "item" => Ok(Self::Item { path }),
            other => Err(unknown_variant(
                other,
                &["state", "item"],
                &obj.path("source"),
            )),
        }
    }

    pub fn path(&self) -> &FieldPath {
        match self {
            Self::State { path } | Self::Item { path } => path,
        }
    }
}

/// Builds one field of an executable's input (or a succeed's output) from a data selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct InputBinding {
    pub target: FieldPath,
    pub value: DataSelector,
}

impl InputBinding {
    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = Obj::closed(value, at, "InputBinding", &["target", "value"])?;
        Ok(Self {
            target: FieldPath::read(obj.required("target")?, &obj.path("target"))?,
            value: DataSelector::read(obj.required("value")?, &obj.path("value"))?,
        })
    }

    pub fn read_list(value: &Json, at: &At) -> Result<Vec<Self>, ParseError> {
        array_of(value, at, Self::read)
    }
}

/// Which part of an executable's settled outcome a write reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputChannel {
    Out,
    Signal,
    Diagnostic,
}

/// A path into one channel of a node's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct NodeOutputSelector {
    pub node: NodeName,
    pub channel: OutputChannel,
    pub path: FieldPath,
}

impl NodeOutputSelector {
    fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = Obj::closed(
            value,
            at,
            "NodeOutputSelector",
            &["node", "channel", "path"],
        )?;
        let channel = match obj.string("channel")? {
            "out" => OutputChannel::Out,
            "signal" => OutputChannel::Signal,
            "diagnostic" => OutputChannel::Diagnostic,
            other => {
                return Err(unknown_variant(
                    other,
                    &["out", "signal", "diagnostic"],
                    &obj.path("channel"),
                ));
            }
        };
        Ok(Self {
            node: NodeName::read(obj.required("node")?, &obj.path("node"))?,
            channel,
            path: FieldPath::read(obj.required("path")?, &obj.path("path"))?,
        })
    }
}

/// Copies part of an executable's outcome into the enclosing group's state.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct WriteBinding {
    pub value: NodeOutputSelector,
    pub target: FieldPath,
}

impl WriteBinding {
    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = Obj::closed(value, at, "WriteBinding", &["value", "target"])?;
        Ok(Self {
            value: NodeOutputSelector::read(obj.required("value")?, &obj.path("value"))?,
            target: FieldPath::read(obj.required("target")?, &obj.path("target"))?,
        })
    }

    pub fn read_list(value: &Json, at: &At) -> Result<Vec<Self>, ParseError> {
        array_of(value, at, Self::read)
    }
}

/// Which family of control facts a guard reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlSource {
    Signal,
    Error,
    Group,
}

impl ControlSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Signal => "signal",
            Self::Error => "error",
            Self::Group => "group",
        }
    }
}

/// Names one closed control domain: a verifier signal, an executable's error, or a group fact.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ControlSelector {
    pub name: NodeName,
    pub source: ControlSource,
    pub field: Option<FieldName>,
}

impl ControlSelector {
    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = Obj::closed(value, at, "ControlSelector", &["name", "source", "field"])?;
        let source = match obj.string("source")? {
            "signal" => ControlSource::Signal,
            "error" => ControlSource::Error,
            "group" => ControlSource::Group,
            other => {
                return Err(unknown_variant(
                    other,
                    &["signal", "error", "group"],
                    &obj.path("source"),
                ));
            }
        };
        let field = obj
            .optional("field")
            .map(|v| FieldName::read(v, &obj.path("field")))
            .transpose()?;
        Ok(Self {
            name: NodeName::read(obj.required("name")?, &obj.path("name"))?,
            source,
            field,
        })
    }
}

/// A boolean predicate over control facts; guards never run code.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Guard {
    In {
        value: ControlSelector,
        labels: EnumSet,
    },
    All {
        guards: Vec<Guard>,
    },
    Any {
        guards: Vec<Guard>,
    },
    Not {
        guard: Box<Guard>,
    },
    KOfN {
        count: PositiveInteger,
        values: Vec<ControlSelector>,
        labels: EnumSet,
    },
    KOfMap {
        count: PositiveInteger,
        value: ControlSelector,
        labels: EnumSet,
    },
}

const GUARD_KINDS: [&str; 6] = ["in", "all", "any", "not", "k_of_n", "k_of_map"];

impl Guard {
    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = tagged(value, at, "Guard")?;
        let kind = obj.tag("kind", "Guard")?;
        let labels = |obj: &Obj| EnumSet::read(obj.required("labels")?, &obj.path("labels"));
        let count = |obj: &Obj| PositiveInteger::read(obj.required("count")?, &obj.path("count"));
        let selector =
            |obj: &Obj| ControlSelector::read(obj.required("value")?, &obj.path("value"));
        let guards =
            |obj: &Obj| non_empty_vec(obj.required("guards")?, &obj.path("guards"), Guard::read);
        Ok(match kind {
            "in" => {
                variant(&obj, "kind", &["value", "labels"])?;
                Self::In {
                    value: selector(&obj)?,
                    labels: labels(&obj)?,
                }
            }
            "all" => {
                variant(&obj, "kind", &["guards"])?;
                Self::All {
                    guards: guards(&obj)?,
                }
            }
            "any" => {
                variant(&obj, "kind", &["guards"])?;
                Self::Any {
                    guards: guards(&obj)?,
                }
            }
            "not" => {
                variant(&obj, "kind", &["guard"])?;
                Self::Not {
                    guard: Box::new(Guard::read(obj.required("guard")?, &obj.path("guard"))?),
                }
            }
            "k_of_n" => {
                variant(&obj, "kind", &["count", "values", "labels"])?;
                Self::KOfN {
                    count: count(&obj)?,
                    values: non_empty_vec(
                        obj.required("values")?,
                        &obj.path("values"),
                        ControlSelector::read,
                    )?,
                    labels: labels(&obj)?,
                }
            }
            "k_of_map" => {
                variant(&obj, "kind", &["count", "value", "labels"])?;
                Self::KOfMap {
                    count: count(&obj)?,
                    value: selector(&obj)?,
                    labels: labels(&obj)?,
                }
            }
            other => return Err(unknown_variant(other, &GUARD_KINDS, &obj.path("kind"))),
        })
    }

    /// Every control selector of this guard, in pre-order with multiplicity.
    pub fn selectors(&self) -> Vec<&ControlSelector> {
        let mut out = Vec::new();
        self.collect_selectors(&mut out);
        out
    }

    fn collect_selectors<'a>(&'a self, out: &mut Vec<&'a ControlSelector>) {
        match self {
            Self::In { value, .. } | Self::KOfMap { value, .. } => out.push(value),
            Self::KOfN { values, .. } => out.extend(values.iter()),
            Self::All { guards } | Self::Any { guards } => {
                guards.iter().for_each(|g| g.collect_selectors(out))
            }
            Self::Not { guard } => guard.collect_selectors(out),
        }
    }

    /// Guard nodes counted towards the guard-node ceilings.
    pub fn node_count(&self) -> u64 {
        match self {
            Self::In { .. } | Self::KOfN { .. } | Self::KOfMap { .. } => 1,
            Self::All { guards } | Self::Any { guards } => {
                1 + guards.iter().map(Guard::node_count).sum::<u64>()
            }
            Self::Not { guard } => 1 + guard.node_count(),
        }
    }
}

/// How a par settles: all branches, any branch, a quorum, or the first branch satisfying a guard.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Join {
    All,
    Any,
    Quorum { count: PositiveInteger },
    First { when: Guard },
}

impl Join {
    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = tagged(value, at, "Join")?;
        Ok(match obj.tag("kind", "Join")? {
            "all" => {
                variant(&obj, "kind", &[])?;
                Self::All
            }
            "any" => {
                variant(&obj, "kind", &[])?;
                Self::Any
            }
            "quorum" => {
                variant(&obj, "kind", &["count"])?;
                Self::Quorum {
                    count: PositiveInteger::read(obj.required("count")?, &obj.path("count"))?,
                }
            }
            "first" => {
                variant(&obj, "kind", &["when"])?;
                Self::First {
                    when: Guard::read(obj.required("when")?, &obj.path("when"))?,
                }
            }
            other => {
                return Err(unknown_variant(
                    other,
                    &["all", "any", "quorum", "first"],
                    &obj.path("kind"),
                ));
            }
        })
    }
}

crate::json::value_entry_point!(
    DataSelector,
    InputBinding,
    WriteBinding,
    ControlSelector,
    Guard,
    Join
);

impl InputBinding {
    pub fn parse_list(
        value: &serde_json::Value,
        at: &crate::json::JsonPath,
    ) -> Result<Vec<Self>, ParseError> {
        let arena = crate::json::Arena::new();
        Self::read_list(&Json::from_value(value, &arena), &At::Base(at))
    }
}

impl WriteBinding {
    pub fn parse_list(
        value: &serde_json::Value,
        at: &crate::json::JsonPath,
    ) -> Result<Vec<Self>, ParseError> {
        let arena = crate::json::Arena::new();
        Self::read_list(&Json::from_value(value, &arena), &At::Base(at))
    }
}
