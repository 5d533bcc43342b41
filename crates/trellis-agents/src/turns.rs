//! The turn loop of one agent execution: run the CLI, read what it printed, then settle, ask
//! for a correction, or retry once after a provider failure.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use trellis_graph::{FailureReason, WorkerErrorCode, WorkerOutcome};
use trellis_process::ProcessEnd;

use crate::failure::{ProviderFailureKind, advice};
use crate::forward::LogForwarder;
use crate::harness::{HarnessEvent, LogStream, TokenUsage};
use crate::prompt::{CONTINUE_PROMPT, render_correction};
use crate::protocol::{CliProtocol, Launch, Transcript, Turn, usage_increment};
use crate::reply::{ReplyVerdict, judge_reply};
use crate::runner::{TurnEnd, TurnRunner};

/// Most correction turns after a rejected reply; the next rejection settles `malformed`.
pub const MAX_CORRECTIONS: u32 = 2;

/// How to judge every turn of one execution.
pub(crate) struct TurnLoop<'a> {
    pub protocol: &'a dyn CliProtocol,
    pub launch: &'a Launch<'a>,
    pub first_prompt: String,
}

/// What the loop learned about the provider session, and the usage it spent.
#[derive(Debug, Default)]
pub(crate) struct SessionState {
    pub session_id: Option<String>,
    /// The CLI's last running usage total (CLIs that report cumulatively).
    pub reported_total: TokenUsage,
    /// This execution's usage.
    pub usage: TokenUsage,
    corrections: u32,
    retried_provider_failure: bool,
}

impl SessionState {
    pub fn continuing(session_id: Option<String>, reported_total: TokenUsage) -> Self {
        Self {
            session_id,
            reported_total,
            ..Self::default()
        }
    }
}

/// What happens after a turn.
enum Next {
    Turn(String),
    Settle(WorkerOutcome),
}

impl TurnLoop<'_> {
    fn name(&self) -> &'static str {
        self.protocol.kind().as_str()
    }

    /// Runs turns until the execution settles.
    pub async fn run(
        &self,
        runner: &mut dyn TurnRunner,
        state: &mut SessionState,
        forwarder: &mut LogForwarder,
        cancel: &CancellationToken,
    ) -> WorkerOutcome {
        let request = self.launch.request;
        let started = Instant::now();
        let mut prompt = self.first_prompt.clone();
        loop {
            let remaining = request
                .deadline
                .map(|deadline| deadline.saturating_sub(started.elapsed()));
            if remaining == Some(Duration::ZERO) {
                forwarder.system("deadline (timeoutMs) passed; agent stopped".into());
                return WorkerOutcome::failure(WorkerErrorCode::Timeout);
            }
            let turn = Turn {
                prompt: &prompt,
                resume: state.session_id.as_deref(),
            };
            let (transcript, end) = match runner.run(&turn, remaining, forwarder, cancel).await {
                Ok(TurnEnd::Ran { transcript, end }) => (*transcript, end),
                Ok(TurnEnd::Stopped(end)) => return stopped(end, forwarder),
                Err(message) => {
                    forwarder.system(message);
                    return WorkerOutcome::failure(WorkerErrorCode::Crash);
                }
            };
            match self.assess(state, transcript, &end, forwarder) {
                Next::Turn(next) => prompt = next,
                Next::Settle(outcome) => return outcome,
            }
        }
    }

    /// Decides what a finished turn means.
    fn assess(
        &self,
        state: &mut SessionState,
        transcript: Transcript,
        end: &ProcessEnd,
        forwarder: &mut LogForwarder,
    ) -> Next {
        let name = self.name();
        if let Some(seen) = &transcript.session_id {
            match &state.session_id {
                Some(known) if known != seen => {
                    forwarder.system(format!(
                        "{name} answered in session {seen} instead of {known}; the session is lost"
                    ));
                    return Next::Settle(WorkerOutcome::failure(WorkerErrorCode::Crash));
                }
                _ => state.session_id = Some(seen.clone()),
            }
        }
        if let Some(why) = &transcript.session_lost {
            forwarder.system(format!("{name} lost the session: {why}; settled crash"));
            return Next::Settle(WorkerOutcome::failure(WorkerErrorCode::Crash));
        }
        if let Some(other) = &transcript.conflicting_session {
            forwarder.system(format!(
                "{name} switched to session {other} mid-turn; the session is lost"
            ));
            return Next::Settle(WorkerOutcome::failure(WorkerErrorCode::Crash));
        }
        if let Some(reported) = transcript.usage {
            let increment = if self.protocol.usage_is_cumulative() {
                let increment = usage_increment(&reported, &state.reported_total);
                state.reported_total = reported;
                increment
            } else {
                reported
            };
            state.usage.add(&increment);
            forwarder.event(HarnessEvent::Usage(increment));
        }
        if let Some(error) = &transcript.provider_error {
            let kind = transcript
                .failure_hint
                .unwrap_or_else(|| ProviderFailureKind::of_message(error));
            if !kind.is_retryable() {
                return Next::Settle(self.settle_named_failure(kind, error, forwarder));
            }
            forwarder.emit(
                LogStream::Error,
                &format!("{} provider failure: {error}", self.protocol.label()),
            );
            if state.retried_provider_failure {
                forwarder.system("second provider failure; settled crash".into());
                return Next::Settle(WorkerOutcome::failure(WorkerErrorCode::Crash));
            }
            state.retried_provider_failure = true;
            forwarder.system("retrying once after the provider failure".into());
            return Next::Turn(if state.session_id.is_some() {
                CONTINUE_PROMPT.to_owned()
            } else {
                self.first_prompt.clone()
            });
        }
        if let ProcessEnd::KilledFromOutside { signal } = end {
            forwarder.killed_from_outside = Some(*signal);
            forwarder.system(format!(
                "{name} {}; settled crash, and a resumed run runs it again",
                end.describe()
            ));
            return Next::Settle(WorkerOutcome::failure(WorkerErrorCode::Crash));
        }
        if let Some(ending) = abnormal_ending(end, transcript.events) {
            forwarder.system(format!("{name} {ending}; settled crash"));
            return Next::Settle(WorkerOutcome::failure(WorkerErrorCode::Crash));
        }
        let Some(reply) = transcript.reply else {
            forwarder.system(format!(
                "{name} finished without a final reply; settled crash"
            ));
            return Next::Settle(WorkerOutcome::failure(WorkerErrorCode::Crash));
        };
        let contract = &self.launch.request.contract;
        match judge_reply(contract, self.protocol.dialect(), reply) {
            ReplyVerdict::Accepted(outcome) => Next::Settle(outcome),
            ReplyVerdict::Refused(reason) => {
                forwarder.system(format!("the agent refused the task: {reason}"));
                Next::Settle(WorkerOutcome::failure(WorkerErrorCode::Refusal))
            }
            ReplyVerdict::Rejected(reason) if state.corrections >= MAX_CORRECTIONS => {
                forwarder.system(format!(
                    "reply rejected after {MAX_CORRECTIONS} corrections: {reason}; settled malformed"
                ));
                Next::Settle(WorkerOutcome::Error {
                    code: WorkerErrorCode::Malformed,
                    reason: FailureReason::MalformedResult,
                })
            }
            ReplyVerdict::Rejected(reason) if state.session_id.is_none() => {
                forwarder.system(format!(
                    "reply rejected ({reason}) but {name} reported no session to correct it in; \
                     settled crash"
                ));
                Next::Settle(WorkerOutcome::failure(WorkerErrorCode::Crash))
            }
            ReplyVerdict::Rejected(reason) => {
                state.corrections += 1;
                forwarder.system(format!(
                    "reply rejected: {reason}; asking for correction {} of {MAX_CORRECTIONS}",
                    state.corrections
                ));
                Next::Turn(render_correction(contract, &reason))
            }
        }
    }
}

impl TurnLoop<'_> {
    /// Settles a failure whose kind says retrying cannot help: authentication settles
    /// `refusal` (`authentication_required`), the others `crash`. The last error line is what
    /// to do about it, so a run's cause can quote it.
    fn settle_named_failure(
        &self,
        kind: ProviderFailureKind,
        error: &str,
        forwarder: &mut LogForwarder,
    ) -> WorkerOutcome {
        let label = self.protocol.label();
        let failure = format!("{label} provider failure ({}): {error}", kind.as_str());
        let gateway = !self.launch.provider.is_native();
        match advice(self.protocol.kind(), kind, gateway) {
            // Authentication: the fix alone is the last line; the provider's words come first.
            Some(advice) if kind == ProviderFailureKind::AuthenticationRequired => {
                forwarder.emit(LogStream::Error, &failure);
                forwarder.emit(LogStream::Error, &advice);
            }
            Some(advice) => forwarder.emit(LogStream::Error, &format!("{failure} — {advice}")),
            None => forwarder.emit(LogStream::Error, &failure),
        }
        forwarder.system(format!("{} is not retried; settled", kind.as_str()));
        match kind {
            ProviderFailureKind::AuthenticationRequired => WorkerOutcome::Error {
                code: WorkerErrorCode::Refusal,
                reason: FailureReason::AuthenticationRequired,
            },
            _ => WorkerOutcome::failure(WorkerErrorCode::Crash),
        }
    }
}

/// The outcome of a process Trellis stopped (or could not start).
fn stopped(end: ProcessEnd, forwarder: &mut LogForwarder) -> WorkerOutcome {
    let (note, code) = match end {
        ProcessEnd::DeadlineExceeded => (
            "deadline (timeoutMs) passed; agent stopped".to_owned(),
            WorkerErrorCode::Timeout,
        ),
        ProcessEnd::IdleExceeded => (
            "idle limit (idleTimeoutMs) passed; agent stopped".to_owned(),
            WorkerErrorCode::Timeout,
        ),
        ProcessEnd::Cancelled => (
            "execution cancelled; agent stopped".to_owned(),
            WorkerErrorCode::Refusal,
        ),
        ProcessEnd::KilledFromOutside { signal } => {
            forwarder.killed_from_outside = Some(signal);
            (
                format!(
                    "agent {}; settled crash, and a resumed run runs it again",
                    end.describe()
                ),
                WorkerErrorCode::Crash,
            )
        }
        ProcessEnd::SpawnFailed(message) => (message, WorkerErrorCode::Crash),
        ProcessEnd::Exited { .. } | ProcessEnd::Crashed { .. } => {
            (format!("agent {}", end.describe()), WorkerErrorCode::Crash)
        }
    };
    forwarder.system(note);
    WorkerOutcome::failure(code)
}

/// Describes an exit that cannot carry a usable reply, or `None` for a clean exit.
fn abnormal_ending(end: &ProcessEnd, events: usize) -> Option<String> {
    match end {
        ProcessEnd::Exited { code: 0 } => None,
        ProcessEnd::Exited { code } if events == 0 => Some(format!(
            "exited with code {code} before printing any event (startup failure)"
        )),
        other => Some(other.describe()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exits_are_described_for_the_log() {
        assert_eq!(abnormal_ending(&ProcessEnd::Exited { code: 0 }, 0), None);
        assert_eq!(
            abnormal_ending(&ProcessEnd::Crashed { signal: 11 }, 3).as_deref(),
            Some("crashed with signal 11 (SIGSEGV)")
        );
        assert!(
            abnormal_ending(&ProcessEnd::Exited { code: 2 }, 0)
                .unwrap()
                .contains("startup failure")
        );
        assert_eq!(
            abnormal_ending(&ProcessEnd::Exited { code: 1 }, 4).as_deref(),
            Some("exited with code 1")
        );
    }
}
