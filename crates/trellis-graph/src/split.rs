//! Reads a long list of child nodes on two threads: a large graph's root sequence holds most of
//! its nodes, and building their typed trees (thousands of small allocations walking an arena
//! tree much larger than a core's cache) is the slower half of parsing.

use std::cell::Cell;

use crate::ident::non_empty_vec;
use crate::json::{At, ParseError};
use crate::node::GraphNode;
use crate::tree::Json;

/// Lists shorter than this are read on the calling thread: a thread costs tens of
/// microseconds, about what reading a few dozen small nodes costs, and the reference templates
/// stay well below it.
const SPLIT_MIN_ITEMS: usize = 64;

/// Stack of the helper thread, as large as a main thread's so deep documents read the same.
const HELPER_STACK_BYTES: usize = 8 << 20;

thread_local! {
    /// False while this thread reads one half of a split list (no nested splitting).
    static SPLIT_ALLOWED: Cell<bool> = const { Cell::new(true) };
}

/// Forbids splitting on this thread until dropped (then restores the previous setting).
struct NoSplit(bool);

impl NoSplit {
    fn enter() -> Self {
        Self(SPLIT_ALLOWED.replace(false))
    }
}

impl Drop for NoSplit {
    fn drop(&mut self) {
        SPLIT_ALLOWED.set(self.0);
    }
}

/// Reads the items of `items` starting at position `offset` of the list at `at`.
fn read_range(items: &[Json], offset: usize, at: &At) -> Result<Vec<GraphNode>, ParseError> {
    let _no_split = NoSplit::enter();
    items
        .iter()
        .enumerate()
        .map(|(i, item)| GraphNode::read(item, &at.index(offset + i)))
        .collect()
}

/// A non-empty list of nodes, exactly as [`non_empty_vec`] with [`GraphNode::read`] reads it
/// (same checks, same first error in document order); long lists are read in two halves at
/// once.
pub(crate) fn node_list(value: &Json, at: &At) -> Result<Vec<GraphNode>, ParseError> {
    let items = match value {
        Json::Array(items)
            if items.len() >= SPLIT_MIN_ITEMS
                && items.len() <= crate::limits::MAX_COLLECTION_ITEMS
                && SPLIT_ALLOWED.get()
                && crate::cores::second_core() =>
        {
            items
        }
        _ => return non_empty_vec(value, at, GraphNode::read),
    };
    let (head, tail) = items.split_at(items.len() / 2);
    let (head, tail) = std::thread::scope(|scope| {
        let helper = std::thread::Builder::new()
            .stack_size(HELPER_STACK_BYTES)
            .spawn_scoped(scope, || read_range(tail, head.len(), at));
        let Ok(helper) = helper else {
            // No thread available: the second half is read here as well.
            return (
                read_range(head, 0, at),
                Some(read_range(tail, head.len(), at)),
            );
        };
        let head = read_range(head, 0, at);
        // A panic in the helper is re-raised here, as reading on one thread would.
        let tail = helper
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (head, Some(tail))
    });
    let mut nodes = head?;
    if let Some(tail) = tail {
        nodes.extend(tail?);
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::node::GraphNode;

    fn seq_of(children: Vec<Value>) -> String {
        json!({"kind": "seq", "name": "root", "state": {"kind": "null"},
               "promotedStatePaths": [], "children": children})
        .to_string()
    }

    fn fail(i: usize) -> Value {
        json!({"kind": "fail", "name": format!("f{i}"), "reason": "stopped"})
    }

    /// Long lists read in halves give the nodes, and the first error, of a one-thread read.
    #[test]
    fn split_lists_read_like_one_thread() {
        let children: Vec<Value> = (0..100).map(fail).collect();
        let parsed = GraphNode::from_json_str(&seq_of(children.clone()));
        let GraphNode::Seq(seq) = parsed.unwrap() else {
            panic!("a seq")
        };
        let names: Vec<&str> = seq.children.iter().map(|c| c.name().as_str()).collect();
        let expected: Vec<String> = (0..100).map(|i| format!("f{i}")).collect();
        assert_eq!(names, expected);
        for bad in [[10, 80], [60, 90], [49, 50]] {
            let mut broken = children.clone();
            for i in bad {
                broken[i]["name"] = json!("");
            }
            let error = GraphNode::from_json_str(&seq_of(broken)).unwrap_err();
            assert_eq!(
                error.location.to_string(),
                format!("$.children[{}].name", bad[0])
            );
        }
    }
}
