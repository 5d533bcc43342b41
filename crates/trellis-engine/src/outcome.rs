//! How both reducers read a worker's outcome: which outcome kinds a node may settle with, and
//! the label naming what a write binding reads (used in their error messages).

use trellis_graph::{OutputChannel, WorkerOutcome};

/// Steps settle as `verified` or `error`, verifiers as `verifier` or `error`.
pub(crate) fn outcome_fits(outcome: &WorkerOutcome, verifier: bool) -> bool {
    match outcome {
        WorkerOutcome::Verified { .. } => !verifier,
        WorkerOutcome::Verifier { .. } => verifier,
        WorkerOutcome::Error { .. } => true,
    }
}

/// `node.channel.path`, naming what a write binding reads.
pub(crate) fn channel_label(binding: &trellis_graph::WriteBinding) -> String {
    let channel = match binding.value.channel {
        OutputChannel::Out => "out",
        OutputChannel::Signal => "signal",
        OutputChannel::Diagnostic => "diagnostic",
    };
    format!(
        "{}.{channel}.{}",
        binding.value.node,
        binding.value.path.dotted()
    )
}
