//! Following a run after it starts: a receipt, then NDJSON status events (machine output) or
//! the live view (terminal), until the run ends. Interrupting only detaches.

use std::io::Write;

use trellis_runtime::{Cursor, GraphLayout, Receipt, RunId, Runtime};

use crate::live::LiveView;

/// Prints the receipt and follows unless detached; the exit code reflects the run's result.
pub fn after_launch(
    runtime: &Runtime,
    receipt: &Receipt,
    detach: bool,
    machine: bool,
    layout: Option<&GraphLayout>,
) -> anyhow::Result<u8> {
    let run_id = &receipt.run_id;
    if machine {
        outln!("{}", serde_json::json!({"runId": run_id.as_str()}));
        std::io::stdout().flush()?;
    } else {
        let how = if receipt.created {
            "started"
        } else {
            "already submitted with this key"
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
        follow_ndjson(runtime, run_id)
    } else {
        LiveView::new(runtime, run_id.clone(), layout).run()
    }
}

/// Exit code of a finished run: 0 succeeded, 1 failed.
pub fn exit_code(runtime: &Runtime, run_id: &RunId) -> anyhow::Result<u8> {
    Ok(if runtime.status(run_id)?.summary.succeeded() {
        0
    } else {
        1
    })
}

/// Prints one status line per recorded event until the run is terminal.
pub fn follow_ndjson(runtime: &Runtime, run_id: &RunId) -> anyhow::Result<u8> {
    print_watch(runtime, run_id, Cursor::START)?;
    exit_code(runtime, run_id)
}

/// Prints the NDJSON watch lines of a run after `after` until it ends.
pub fn print_watch(runtime: &Runtime, run_id: &RunId, after: Cursor) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for update in runtime.watch(run_id, after)? {
        writeln!(out, "{}", serde_json::to_string(&update?)?)?;
        out.flush()?;
    }
    Ok(())
}
