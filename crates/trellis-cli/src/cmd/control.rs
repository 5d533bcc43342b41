//! `trellis force-stop | resume` and the hidden controller entry point.

use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use trellis_ledger::{RunId, TerminalResult};
use trellis_runtime::controller::run_controller;
use trellis_runtime::home::{Lease, LeaseAttempt};
use trellis_runtime::launch::{LaunchRequest, controller_env, launch};
use trellis_runtime::recovery::{TerminalReason, finalize_orphaned};
use trellis_runtime::submission::Submission;

use crate::cmd::follow;
use crate::cmd::observe::status_json;
use crate::cmd::run::machine_output;
use crate::context::Context;

/// How long `force-stop` waits for the controller to settle the run.
const STOP_WAIT: Duration = Duration::from_secs(15);

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

/// Stops a run: cancels its active executions (their process groups are killed) and ends it
/// `force_stopped`. A run whose controller is already gone is finalized directly.
pub fn force_stop(ctx: &Context, args: &ForceStopArgs) -> anyhow::Result<u8> {
    let run_id =
        RunId::new(&args.run).map_err(|e| anyhow!("{:?} is not a run id: {e}", args.run))?;
    let head = ctx.store.head(&run_id)?;
    if !head.is_finished() {
        let lease_path = ctx.home.controller_lease_path(run_id.as_str())?;
        match Lease::try_acquire(&lease_path)? {
            LeaseAttempt::Acquired(lease) => {
                finalize_orphaned(ctx.store.as_ref(), &run_id, TerminalReason::ForceStopped)?;
                drop(lease);
            }
            LeaseAttempt::HeldElsewhere => {
                let head = ctx.store.request_force_stop(&run_id)?;
                if let Some(controller) = &head.progress.controller {
                    nudge(controller.pid, &run_id);
                }
                wait_finished(ctx, &run_id)?;
            }
        }
    }
    outln!("{}", status_json(&ctx.store.head(&run_id)?));
    Ok(0)
}

/// Wakes the controller with SIGTERM, after checking the pid still runs our controller.
fn nudge(pid: u32, run_id: &RunId) {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmdline = String::from_utf8_lossy(&cmdline);
    if cmdline.contains("__controller")
        && cmdline.contains(run_id.as_str())
        && let Ok(pid) = i32::try_from(pid)
    {
        // SAFETY: kill(2) on a pid we just checked; a stale pid gets no signal.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
}

fn wait_finished(ctx: &Context, run_id: &RunId) -> anyhow::Result<()> {
    let deadline = Instant::now() + STOP_WAIT;
    while Instant::now() < deadline {
        if ctx.store.head(run_id)?.is_finished() {
            return Ok(());
        }
        ctx.reconcile(run_id)?;
        std::thread::sleep(Duration::from_millis(25));
    }
    Ok(())
}

/// Starts a successor of a failed run: same graph, input and plan; every genuinely settled
/// outcome of the predecessor is reused, only what never settled runs.
pub fn resume(ctx: &Context, args: &ResumeArgs) -> anyhow::Result<u8> {
    let previous = ctx.known_run(&args.run)?;
    let head = ctx.store.head(&previous)?;
    match &head.progress.terminal {
        None => bail!(
            "run {} is still active; stop it first or wait for it",
            previous.as_str()
        ),
        Some(TerminalResult::Succeeded { .. }) => {
            bail!(
                "run {} succeeded; there is nothing to resume",
                previous.as_str()
            )
        }
        Some(TerminalResult::Failed { .. }) => {}
    }
    if let Some(successor) = &head.successor {
        bail!(
            "run {} was already resumed as {}",
            previous.as_str(),
            successor.as_str()
        );
    }
    let record = ctx.store.record(&previous)?;
    let admitted = Submission::admit(&record.submission, previous.as_str())?;
    let request = LaunchRequest {
        title: record.title.clone(),
        submission_key: format!("resume-{}", previous.as_str()),
        identity: admitted.identity.clone(),
        predecessor: Some(previous.clone()),
        controller_exe: std::env::current_exe().context("cannot locate the trellis binary")?,
        submission: admitted.submission.clone(),
    };
    let env = controller_env(&admitted.submission.plan.connection_names());
    let launched = launch(&ctx.home, ctx.store.as_ref(), &request, &env)?;
    follow::after_launch(
        ctx,
        &launched,
        args.detach,
        machine_output(args.json),
        Some(&admitted.graph),
    )
}

/// `trellis __controller RUN`: the detached process that owns one run.
pub fn controller(run: &str) -> anyhow::Result<u8> {
    let ctx = Context::open()?;
    let run_id = RunId::new(run).map_err(|e| anyhow!("{run:?} is not a run id: {e}"))?;
    run_controller(
        &ctx.home,
        ctx.store.clone(),
        &run_id,
        &crate::cmd::lanes::agent_harness,
    )?;
    Ok(0)
}
