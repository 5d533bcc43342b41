//! Human rendering shared by commands: diagnostic breadcrumbs, durations, token counts.

use trellis_runtime::TokenUsage;
use trellis_runtime::diagnostics::{GraphDiagnostic, PathSegment};

/// Structural fields that only lead to a child node; a breadcrumb shows the node instead.
const STRUCTURAL: [&str; 6] = ["root", "children", "branches", "node", "body", "otherwise"];

/// Renders a diagnostic path as node names joined by ` › `, e.g.
/// `run › change_loop › reviews › review_result › branches[1] › when`.
pub fn breadcrumb(path: &[PathSegment]) -> String {
    let mut crumbs: Vec<String> = Vec::new();
    // Parts after the last node: structural ones vanish when a node follows.
    let mut tail: Vec<String> = Vec::new();
    for segment in path {
        match segment {
            PathSegment::Node { name } => {
                tail.clear();
                crumbs.push(name.to_string());
            }
            PathSegment::Field { name } => tail.push(name.to_string()),
            PathSegment::Index { index } => match tail.last_mut() {
                Some(last) => last.push_str(&format!("[{index}]")),
                None => tail.push(format!("[{index}]")),
            },
        }
    }
    // A path ending at a node has no tail; a path ending inside one keeps its fields, but a
    // bare structural field alone (like `root`) still says where.
    if crumbs.is_empty() || !tail.iter().all(|t| is_structural(t)) {
        crumbs.extend(tail);
    }
    if crumbs.is_empty() {
        return "graph".to_owned();
    }
    crumbs.join(" › ")
}

fn is_structural(part: &str) -> bool {
    let name = part.split('[').next().unwrap_or(part);
    STRUCTURAL.contains(&name)
}

/// One block per diagnostic: code and message, where, and the nodes concerned.
pub fn diagnostic_block(diagnostic: &GraphDiagnostic) -> String {
    let mut out = format!(
        "error[{}]: {}\n  at    {}\n",
        diagnostic.code.as_str(),
        diagnostic.message,
        breadcrumb(&diagnostic.path)
    );
    if !diagnostic.related_nodes.is_empty() {
        let names: Vec<&str> = diagnostic
            .related_nodes
            .iter()
            .map(|n| n.as_str())
            .collect();
        out.push_str(&format!("  nodes {}\n", names.join(", ")));
    }
    out
}

/// `1234` ms → `1.2s`, `65000` → `1m05s`.
pub fn human_ms(ms: u64) -> String {
    let secs = ms / 1000;
    if secs < 60 {
        format!("{}.{}s", secs, (ms % 1000) / 100)
    } else if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60)
    }
}

/// `12,345 in / 678 out (cache 9 read, 0 written), $0.12`.
pub fn human_tokens(usage: &TokenUsage) -> String {
    let mut out = format!(
        "{} in / {} out",
        grouped(usage.input_tokens),
        grouped(usage.output_tokens)
    );
    if usage.cache_read_tokens + usage.cache_write_tokens > 0 {
        out.push_str(&format!(
            " (cache {} read, {} written)",
            grouped(usage.cache_read_tokens),
            grouped(usage.cache_write_tokens)
        ));
    }
    if let Some(cost) = usage.cost_usd {
        out.push_str(&format!(", ${cost:.2}"));
    }
    out
}

fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use trellis_runtime::diagnostics::{FieldName, NodeName};

    fn field(n: &str) -> PathSegment {
        PathSegment::Field {
            name: FieldName::new(n).unwrap(),
        }
    }
    fn node(n: &str) -> PathSegment {
        PathSegment::Node {
            name: NodeName::new(n).unwrap(),
        }
    }
    fn index(i: u32) -> PathSegment {
        PathSegment::Index { index: i }
    }

    #[test]
    fn breadcrumbs_name_nodes_and_keep_inner_fields() {
        let path = vec![
            field("root"),
            node("run"),
            field("children"),
            index(0),
            node("change_loop"),
            field("body"),
            node("reviews"),
            field("children"),
            index(1),
            node("review_result"),
            field("branches"),
            index(1),
            field("when"),
        ];
        assert_eq!(
            breadcrumb(&path),
            "run › change_loop › reviews › review_result › branches[1] › when"
        );
        let branch_node = vec![
            field("root"),
            node("run"),
            field("branches"),
            index(0),
            field("node"),
            node("done"),
        ];
        assert_eq!(breadcrumb(&branch_node), "run › done");
        assert_eq!(breadcrumb(&[field("root")]), "root");
        assert_eq!(breadcrumb(&[field("profile")]), "profile");
    }

    #[test]
    fn numbers_read_naturally() {
        assert_eq!(human_ms(1234), "1.2s");
        assert_eq!(human_ms(65_000), "1m05s");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }
}
