//! Following a run after it starts: a receipt, then NDJSON status events (machine output) or
//! the live view (terminal), until the run ends. Interrupting only detaches.

use std::io::Write;
use std::time::Duration;

use trellis_graph::GraphSpec;
use trellis_ledger::observe::{EventFollower, StatusTracker};
use trellis_ledger::{Cursor, EventFilter, RunId, TerminalResult};
use trellis_runtime::launch::Launched;

use crate::context::Context;
use crate::live::LiveView;

const POLL: Duration = Duration::from_millis(400);

/// Prints the receipt and follows unless detached; the exit code reflects the run's result.
pub fn after_launch(
    ctx: &Context,
    launched: &Launched,
    detach: bool,
    machine: bool,
    spec: Option<&GraphSpec>,
) -> anyhow::Result<u8> {
    let run_id = launched.run_id();
    if machine {
        outln!("{}", serde_json::json!({"runId": run_id.as_str()}));
        std::io::stdout().flush()?;
    } else {
        let how = match launched {
            Launched::Started(_) => "started",
            Launched::Existing(_) => "already submitted with this key",
        };
        outln!("run {} {how}", run_id.as_str());
    }
    if detach {
        if !machine {
            outln!(
                "detached; follow it with `trellis watch {0}` or `trellis status {0}`",
                run_id.as_str()
            );
        }
        return Ok(0);
    }
    if machine {
        follow_ndjson(ctx, run_id)
    } else {
        LiveView::new(ctx, run_id.clone(), spec)?.run()
    }
}

/// Exit code of a finished run: 0 succeeded, 1 failed.
pub fn exit_code(ctx: &Context, run_id: &RunId) -> anyhow::Result<u8> {
    let head = ctx.store.head(run_id)?;
    Ok(match head.progress.terminal {
        Some(TerminalResult::Succeeded { .. }) => 0,
        _ => 1,
    })
}

/// Prints one status line per recorded event until the run is terminal.
pub fn follow_ndjson(ctx: &Context, run_id: &RunId) -> anyhow::Result<u8> {
    let mut tracker = StatusTracker::new(run_id.clone(), ctx.store.head(run_id)?.title);
    let mut follower = EventFollower::new(
        ctx.store.as_ref(),
        run_id.clone(),
        Cursor::START,
        EventFilter::ExceptLogs,
    )?;
    let mut out = std::io::stdout().lock();
    while !follower.is_done() {
        let batch = follower.next_batch(POLL)?;
        if batch.is_empty() {
            ctx.reconcile(run_id)?;
        }
        for stored in &batch {
            if let Some(line) = tracker.observe(stored) {
                writeln!(out, "{}", serde_json::to_string(&line)?)?;
            }
        }
        out.flush()?;
    }
    exit_code(ctx, run_id)
}
