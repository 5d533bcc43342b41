//! `trellis force-stop | resume` and the hidden controller entry point.

use clap::Args;
use trellis_runtime::{ResumeOptions, Runtime, StartMode};

use crate::cmd::follow;
use crate::context::{machine_output, run_id};

#[derive(Debug, Args)]
pub struct ForceStopArgs {
    /// The run to stop.
    pub run: String,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The failed run to continue.
    pub run: String,
    /// Start the successor and return at once.
    #[arg(short, long)]
    pub detach: bool,
    /// Machine output (receipt line, then NDJSON events).
    #[arg(long)]
    pub json: bool,
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
    };
    let receipt = runtime.resume(&previous, options)?;
    follow::after_launch(
        runtime,
        &receipt,
        args.detach,
        machine_output(args.json),
        layout.as_ref(),
    )
}

/// `trellis __controller RUN`: the detached process that owns one run.
pub fn controller(runtime: &Runtime, run: &str) -> anyhow::Result<u8> {
    runtime.run_controller(&run_id(run)?)?;
    Ok(0)
}
