//! How one turn reaches an agent CLI: a fresh process per turn (prompt modes), or a live
//! protocol connection kept for the whole execution (Copilot's headless JSON-RPC).

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use trellis_process::{BoxFuture, ProcessEnd, ProcessLimits, ProcessSpec, Sandbox, run_process};

use crate::containment::contain;

use crate::forward::LogForwarder;
use crate::protocol::{
    CliProtocol, Launch, MAX_EVENT_BYTES, Transcript, Turn, TurnObserver, merge_env,
};

/// How a turn ended.
pub(crate) enum TurnEnd {
    /// The CLI answered (or died while answering); what it said and how it ended.
    Ran {
        transcript: Box<Transcript>,
        end: ProcessEnd,
    },
    /// Trellis stopped it (deadline, idle limit, cancellation) or it could not start.
    Stopped(ProcessEnd),
}

/// Runs the turns of one execution.
pub(crate) trait TurnRunner: Send {
    /// Runs one turn within `remaining`; an `Err` is a setup problem, settled `crash`.
    fn run<'a>(
        &'a mut self,
        turn: &'a Turn<'a>,
        remaining: Option<Duration>,
        forwarder: &'a mut LogForwarder,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<TurnEnd, String>>;

    /// Releases what the runner keeps between turns (a live connection).
    fn close<'a>(&'a mut self, _forwarder: &'a mut LogForwarder) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// A prompt-mode CLI: one process per turn, its stdout events read as they arrive.
pub(crate) struct ProcessTurns<'a> {
    pub protocol: &'a dyn CliProtocol,
    pub launch: &'a Launch<'a>,
    pub program: &'a str,
    /// The environment shared by every turn (lane variables are added per turn).
    pub env: &'a [(String, String)],
    /// Every turn runs in it, when given (`--isolation sandbox`).
    pub sandbox: Option<&'a Sandbox>,
}

impl TurnRunner for ProcessTurns<'_> {
    fn run<'a>(
        &'a mut self,
        turn: &'a Turn<'a>,
        remaining: Option<Duration>,
        forwarder: &'a mut LogForwarder,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<TurnEnd, String>> {
        Box::pin(async move {
            let request = self.launch.request;
            let invocation = self.protocol.invocation(self.launch, turn)?;
            let spec = ProcessSpec {
                program: self.program.to_owned(),
                args: invocation.args,
                cwd: request.workspace.clone(),
                env: merge_env([self.env.to_vec(), Vec::new(), invocation.env]),
                stdin: turn.prompt.as_bytes().to_vec(),
                redactor: forwarder.redactor.clone(),
            };
            let spec = match self.sandbox {
                None => spec,
                Some(sandbox) => {
                    let bound: [&std::path::Path; 2] = [&request.scratch, &self.launch.home];
                    contain(sandbox, spec, request, &bound, &[])?
                }
            };
            // Events are parsed as they arrive, so a long session's output is never held whole.
            let limits = ProcessLimits {
                deadline: remaining,
                idle: request.idle_timeout,
                capture_stdout: false,
                max_line_bytes: MAX_EVENT_BYTES,
                ..ProcessLimits::default()
            };
            let mut observer = TurnObserver {
                forwarder: &mut *forwarder,
                protocol: self.protocol,
                parser: self.protocol.parser(),
            };
            let report = run_process(&spec, &limits, cancel, &mut observer).await;
            let mut transcript = observer.parser.finish();
            Ok(match report.end {
                end @ (ProcessEnd::Exited { .. }
                | ProcessEnd::Crashed { .. }
                | ProcessEnd::KilledFromOutside { .. }) => {
                    self.protocol.complete(self.launch, turn, &mut transcript);
                    TurnEnd::Ran {
                        transcript: Box::new(transcript),
                        end,
                    }
                }
                other => TurnEnd::Stopped(other),
            })
        })
    }
}
