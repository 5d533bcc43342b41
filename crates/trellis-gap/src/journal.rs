//! The durable node journal a caller may give the executor: each tool, script and router body
//! is announced before it runs and reported once it settled, and a body whose output an
//! earlier attempt of the same run already settled is not run again.

use serde_json::Value;

/// How one body settled, as the journal is told.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SettledBody<'a> {
    /// The body returned this output (a router's: the dict it returned, before any Send).
    Succeeded(&'a Value),
    /// The body failed with this error text.
    Failed(&'a str),
    /// The body was cancelled before or while running.
    Cancelled,
}

/// Records node bodies durably and recalls the settled outputs of an earlier attempt.
///
/// Bodies are keyed by their full node id (`subgraph.node`, `<send>.target#i`) and their
/// 0-based visit, which replaying the same settled outputs reproduces exactly: routing depends
/// only on outputs, so a replay walks the same super-steps until the first body it cannot
/// recall. Streaming bodies are not journaled; they run again on every attempt.
pub trait NodeJournal: Send + Sync {
    /// The output an earlier attempt settled for this body, to use instead of running it.
    fn recall(&self, node_id: &str, visit: u32) -> Option<Value>;
    /// Called before the body runs; an error keeps it from running (nothing runs that was not
    /// recorded first) and fails the node as cancelled.
    fn dispatched(&self, node_id: &str, visit: u32, node_type: &str) -> Result<(), String>;
    /// Called once the body settled (also for a recalled body, which settles at once).
    fn settled(&self, node_id: &str, visit: u32, outcome: SettledBody<'_>, recalled: bool);
}
