//! What a second thread of a split read hands the calling thread's [`Scanner`]: the split
//! point with the channel its answer arrives on, and the containers it closed (the types
//! `scan.rs` keeps in the scanner and `scan_split.rs` fills and splices).
//!
//! [`Scanner`]: crate::scan::Scanner

use std::sync::mpsc::Receiver;

use crate::tree::Json;

/// The split point and where the second thread's answer arrives.
pub(crate) struct Pending<'a> {
    pub(crate) at: usize,
    pub(crate) answer: Receiver<Option<Rest<'a>>>,
}

/// What the second thread read: the containers it closed, innermost first.
pub(crate) struct Rest<'a> {
    pub(crate) levels: Vec<Level<'a>>,
    /// Deepest container it entered, counted from `HELPER_BASE` (in `scan_split.rs`).
    pub(crate) deepest: usize,
}

/// The entries of one container after the split point, and the position after its closing
/// bracket or brace.
pub(crate) struct Level<'a> {
    pub(crate) entries: Entries<'a>,
    pub(crate) end: usize,
}

pub(crate) enum Entries<'a> {
    Items(Vec<Json<'a>>),
    Members(Vec<(&'a str, Json<'a>)>),
}
