//! `trellis force-stop | resume | checkpoints | discard-workspace` and the hidden controller
//! entry point.

use clap::Args;
use trellis_runtime::{CheckpointBeforeKind, ResumeOptions, Runtime, StartMode};

use crate::cmd::follow;
use crate::context::{machine_output, run_id};
use crate::render::human_ms;

#[derive(Debug, Args)]
pub struct ForceStopArgs {
    /// The run to stop.
    pub run: String,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The failed run to continue.
    pub run: String,
    /// Restore this checkpoint's files (`trellis checkpoints RUN`) and start from its graph
    /// position: what settled before it is reused, everything after runs again. Without it,
    /// the latest checkpoint is restored when the workspace no longer holds the run's last
    /// state.
    #[arg(long, value_name = "ID")]
    pub from_checkpoint: Option<u32>,
    /// Restore even though the workspace changed after the run ended (what it held is kept
    /// under refs/trellis/saved/).
    #[arg(long, requires = "from_checkpoint")]
    pub force: bool,
    /// Start the successor and return at once.
    #[arg(short, long)]
    pub detach: bool,
    /// Machine output (receipt line, then NDJSON events).
    #[arg(long)]
    pub json: bool,
    /// With --target: send the run's connection values to a server over plain http beyond
    /// loopback (only on a network you trust).
    #[arg(long)]
    pub insecure: bool,
}

/// Stops a run: its workers are killed and it ends `force_stopped`.
pub fn force_stop(runtime: &Runtime, args: &ForceStopArgs) -> anyhow::Result<u8> {
    let status = runtime.force_stop(&run_id(&args.run)?)?;
    outln!("{}", serde_json::to_string(&status.summary)?);
    Ok(0)
}

/// Starts a successor of a failed run that reuses every settled outcome.
pub fn resume(runtime: &Runtime, args: &ResumeArgs) -> anyhow::Result<u8> {
    let previous = run_id(&args.run)?;
    let layout = runtime.run_graph(&previous)?.layout;
    let options = ResumeOptions {
        start: StartMode::Detached,
        from_checkpoint: args.from_checkpoint,
        force: args.force,
    };
    // A restore rewrites the work tree with git: killing this command must stop it too.
    runtime.tie_children_to_this_process()?;
    let receipt = runtime.resume(&previous, options)?;
    follow::after_launch(
        runtime,
        &receipt,
        args.detach,
        machine_output(args.json),
        layout.as_ref(),
    )
}

#[derive(Debug, Args)]
pub struct CheckpointsArgs {
    /// The run whose checkpoints to list.
    pub run: String,
    /// Only checkpoints after this one.
    #[arg(long, value_name = "ID")]
    pub after: Option<u32>,
    /// At most this many (1 to 100).
    #[arg(long, value_name = "N", default_value_t = 50,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub limit: u32,
    /// One JSON document: `{"runId", "checkpoints": […], "nextAfter"?}`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DiscardWorkspaceArgs {
    /// The finished worktree-mode run whose worktree to remove.
    pub run: String,
}

/// Lists a run's checkpoints: id, what it preceded, when, files changed since the previous.
pub fn checkpoints(runtime: &Runtime, args: &CheckpointsArgs) -> anyhow::Result<u8> {
    let limit = usize::try_from(args.limit).unwrap_or(usize::MAX);
    let page = runtime.checkpoints(&run_id(&args.run)?, args.after, limit)?;
    if args.json {
        outln!("{}", serde_json::to_string(&page)?);
        return Ok(0);
    }
    if page.checkpoints.is_empty() {
        outln!("no checkpoints (the workspace is not in git, or nothing was written yet)");
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    for checkpoint in &page.checkpoints {
        let kind = match checkpoint.before.kind {
            CheckpointBeforeKind::Node => "node",
            CheckpointBeforeKind::Group => "group",
        };
        outln!(
            "{:>4}  before {kind} {:<24} {}  {} files changed, {} bytes  {}{}",
            checkpoint.id,
            checkpoint.before.name.as_str(),
            format!(
                "{} ago",
                human_ms(now.saturating_sub(checkpoint.taken_at_ms))
            ),
            checkpoint.files_changed,
            checkpoint.bytes_changed,
            &checkpoint.commit[..12.min(checkpoint.commit.len())],
            if checkpoint.kept { "" } else { "  (pruned)" }
        );
    }
    if let Some(next) = page.next_after {
        outln!("more: --after {next}");
    }
    Ok(0)
}

/// Removes the worktree a finished worktree-mode run kept.
pub fn discard_workspace(runtime: &Runtime, args: &DiscardWorkspaceArgs) -> anyhow::Result<u8> {
    let discarded = runtime.discard_workspace(&run_id(&args.run)?)?;
    outln!("{}", serde_json::to_string(&discarded)?);
    Ok(0)
}

/// `trellis __controller RUN`: the detached process that owns one run.
pub fn controller(runtime: &Runtime, run: &str) -> anyhow::Result<u8> {
    runtime.run_controller(&run_id(run)?)?;
    Ok(0)
}
