//! `trellis worker --ledger URL`: a worker host. It claims node executions that controllers on
//! any host queued in the PostgreSQL ledger, runs them with its own harnesses and environment,
//! and reports their outcomes; SIGINT or SIGTERM stops it.

use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use tokio_util::sync::CancellationToken;
use trellis_runtime::WorkerOptions;

use crate::context::open_runtime;

/// The harness names a worker may take executions for.
const HARNESSES: [&str; 6] = ["command", "claude", "codex", "copilot", "pi", "agent"];

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Executions run at once.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub slots: usize,
    /// Which executions to take, comma-separated: command, claude, codex, copilot, pi.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "command"
    )]
    pub harness: Vec<String>,
    /// How long a claim lives without a heartbeat, in milliseconds (renewed every third).
    #[arg(long, value_name = "MS", default_value_t = 15_000)]
    pub lease_ms: u64,
    /// How long to wait between looks at an empty queue, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    pub poll_ms: u64,
}

pub fn run(args: &WorkerArgs, ledger: Option<&str>) -> anyhow::Result<u8> {
    if let Some(unknown) = args
        .harness
        .iter()
        .find(|h| !HARNESSES.contains(&h.as_str()))
    {
        bail!("unknown harness {unknown:?}: use command, claude, codex, copilot or pi");
    }
    if args.lease_ms < 300 {
        bail!("--lease-ms must be at least 300");
    }
    let runtime = open_runtime(ledger)?;
    let options = WorkerOptions {
        slots: args.slots.max(1),
        harnesses: args.harness.clone(),
        lease: Duration::from_millis(args.lease_ms),
        poll: Duration::from_millis(args.poll_ms.max(10)),
        scratch: runtime
            .home()
            .join("worker-scratch")
            .join(std::process::id().to_string()),
    };
    let scratch = options.scratch.clone();
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = tokio.block_on(async {
        let stop = CancellationToken::new();
        let signal_stop = stop.clone();
        tokio::spawn(async move {
            super::serve::shutdown_signal().await;
            signal_stop.cancel();
        });
        outln!(
            "{}",
            serde_json::json!({"worker": "started", "slots": options.slots, "harnesses": options.harnesses})
        );
        Ok::<_, anyhow::Error>(runtime.work(options, stop).await?)
    })?;
    let _ = std::fs::remove_dir_all(scratch);
    outln!(
        "{}",
        serde_json::json!({"worker": "stopped", "completed": report.completed, "refused": report.fenced})
    );
    Ok(0)
}
