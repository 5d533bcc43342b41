//! Listing runs: which runs [`RunStore::list_runs`](crate::store::RunStore::list_runs) returns
//! ([`RunFilter`]) and what each listed run is ([`ListedRun`], or an [`UnreadableRun`]).

use crate::error::LedgerError;
use crate::ids::{Phase, RunId, RunKind};
use crate::limits::MAX_LISTED_RUNS;
use crate::snapshot::RunHead;

/// One run of a listing: its head, or why its stored row could not be read.
pub type ListedRun = Result<RunHead, UnreadableRun>;

/// A run whose stored row is damaged: named by its run id as stored (or its row number when
/// even that is unreadable), with what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableRun {
    pub name: String,
    pub error: LedgerError,
}

impl std::fmt::Display for UnreadableRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "run {}: {}", self.name, self.error)
    }
}

/// Which runs `list_runs` returns, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFilter {
    pub phase: Option<Phase>,
    pub kind: Option<RunKind>,
    /// Only runs listed after this one (keyset paging: pass the last run of the previous page).
    pub after_run: Option<RunId>,
    /// At most this many runs, capped at [`MAX_LISTED_RUNS`].
    pub limit: usize,
}

impl Default for RunFilter {
    fn default() -> Self {
        Self {
            phase: None,
            kind: None,
            after_run: None,
            limit: 100,
        }
    }
}

impl RunFilter {
    /// The limit a backend applies.
    pub fn effective_limit(&self) -> usize {
        self.limit.min(MAX_LISTED_RUNS)
    }
}
