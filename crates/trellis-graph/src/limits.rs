//! Every numeric limit of the GraphSpec contract, named once.

/// Longest identifier (node, field, enum label) in UTF-8 bytes.
pub const MAX_IDENTIFIER_BYTES: usize = 128;
/// Most segments in a field path.
pub const MAX_FIELD_PATH_SEGMENTS: usize = 64;
/// Longest stable reference (`name@version`) in bytes.
pub const MAX_STABLE_REF_BYTES: usize = 256;
/// Largest integer JSON can carry exactly (2^53 - 1).
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;
/// Most items in a non-empty collection or enum set.
pub const MAX_COLLECTION_ITEMS: usize = 4096;
/// Longest node instructions in UTF-8 bytes.
pub const MAX_INSTRUCTIONS_BYTES: usize = 16_384;
/// Longest artifact id or media type in Unicode scalar values.
pub const MAX_ARTIFACT_VALUE_CHARS: usize = 256;
/// Largest document the parser accepts, in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024;
/// Deepest JSON nesting the parser accepts (serde_json's recursion limit refuses a 128th level).
pub const MAX_JSON_NESTING: usize = trellis_json::MAX_NESTING;

/// Verifier ceilings of the full/v1 protocol version.
pub mod ceilings {
    /// Most authored nodes in one graph, all kinds counted.
    pub const GRAPH_NODES: u64 = 4096;
    /// Deepest node nesting, the root being depth 1.
    pub const GRAPH_DEPTH: usize = 64;
    /// Most guard nodes in one guard and in the whole graph.
    pub const GUARD_NODES: u64 = 4096;
    /// Most legal control assignments a finite check may enumerate.
    pub const CONTROL_ASSIGNMENTS: usize = 65_536;
    /// Most loop-body entries of a run.
    pub const LOOP_ENTRIES: u64 = 65_536;
    /// Largest map `maxItems`.
    pub const MAP_ITEMS: u64 = 1024;
    /// Largest `attempts` of one executable.
    pub const ATTEMPTS: u64 = 100;
    /// Most node executions of a run.
    pub const NODE_EXECUTIONS: u64 = 65_536;
    /// Most executions running at once.
    pub const PEAK_CONCURRENCY: u64 = 1024;
}
