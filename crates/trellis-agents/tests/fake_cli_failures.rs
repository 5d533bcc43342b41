//! Provider failures as the real CLIs print them, classified: authentication settles `refusal`
//! (`authentication_required`) without a retry; an unknown model, a rate limit and the like
//! settle `crash` without a retry, named in the error log with what to do.
//!
//! The fakes replay transcripts captured from the pinned CLIs (Claude Code 2.1.328, Codex
//! 0.169.0, Copilot CLI 1.0.102) by `scripts/capture-cli-failures.sh`: each CLI ran once
//! against trellis-testkit's scripted model server on loopback — with no credentials, with a
//! key the server rejects (`--api-key`), and against scripted 404 model / 429 answers — and
//! its stdout, stderr and exit code were stored under `tests/fakes/captured/`.

mod support;

use std::path::PathBuf;

use support::*;
use trellis_agents::{HarnessKind, LogStream, Provider};
use trellis_graph::{FailureReason, WorkerErrorCode, WorkerOutcome};

fn captured(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fakes/captured")
        .join(name)
}

/// Runs one execution of the fake replaying `case`; the outcome, invocations and log lines.
async fn replay(
    kind: HarnessKind,
    provider: Provider,
    case: &str,
) -> (WorkerOutcome, u32, Vec<(LogStream, String)>) {
    let fake = Fake::new(kind);
    let transcript = captured(&format!("{}-{case}", kind.as_str()));
    let mut code = transcript.clone().into_os_string();
    code.push(".code");
    assert!(
        PathBuf::from(code).exists(),
        "missing capture {}",
        transcript.display()
    );
    let mode = format!("replay:{}", transcript.display());
    // A second turn would answer properly: a retry would show as a second invocation.
    fake.turns(&[&mode, "reply"]);
    let (result, events) = run(&fake.harness_on(provider), fake.request(1)).await;
    (result.outcome, fake.invocations(), logs(&events))
}

fn error_lines(logs: &[(LogStream, String)]) -> Vec<&str> {
    logs.iter()
        .filter(|(stream, _)| *stream == LogStream::Error)
        .map(|(_, message)| message.as_str())
        .collect()
}

const AUTHENTICATION: WorkerOutcome = WorkerOutcome::Error {
    code: WorkerErrorCode::Refusal,
    reason: FailureReason::AuthenticationRequired,
};

#[tokio::test]
async fn a_cli_that_is_not_signed_in_is_refused_once_with_the_fix() {
    for (kind, provider, advice) in [
        (
            HarnessKind::Claude,
            Provider::Anthropic,
            "run \"claude\" once",
        ),
        (HarnessKind::Codex, Provider::Openai, "run \"codex login\""),
    ] {
        let (outcome, invocations, logs) = replay(kind, provider, "not-signed-in").await;
        assert_eq!(outcome, AUTHENTICATION, "{kind:?}: {logs:#?}");
        assert_eq!(invocations, 1, "{kind:?}: authentication is not retried");
        let errors = error_lines(&logs);
        assert!(
            errors
                .iter()
                .any(|l| l.contains("(authentication_required)")),
            "{kind:?}: {errors:#?}"
        );
        assert!(
            errors.last().is_some_and(|l| l.contains(advice)),
            "{kind:?}: the last error line says what to do: {errors:#?}"
        );
    }
}

#[tokio::test]
async fn an_invalid_key_is_an_authentication_failure_of_every_cli() {
    for kind in ALL {
        let (outcome, invocations, logs) = replay(kind, Provider::Gateway, "invalid-key").await;
        assert_eq!(outcome, AUTHENTICATION, "{kind:?}: {logs:#?}");
        assert_eq!(invocations, 1, "{kind:?}: authentication is not retried");
        let errors = error_lines(&logs);
        assert!(
            errors
                .last()
                .is_some_and(|l| l.contains("the gateway refused the key")),
            "{kind:?}: {errors:#?}"
        );
    }
}

#[tokio::test]
async fn unknown_models_and_rate_limits_are_named_and_not_retried() {
    for kind in ALL {
        for (case, name) in [
            ("unknown-model", "(unknown_model)"),
            ("rate-limit", "(rate_limited)"),
        ] {
            let (outcome, invocations, logs) = replay(kind, Provider::Gateway, case).await;
            assert_eq!(
                outcome,
                WorkerOutcome::failure(WorkerErrorCode::Crash),
                "{kind:?} {case}: {logs:#?}"
            );
            assert_eq!(invocations, 1, "{kind:?} {case}: not retried");
            let errors = error_lines(&logs);
            assert!(
                errors.iter().any(|l| l.contains(name)),
                "{kind:?} {case}: {errors:#?}"
            );
        }
    }
}

#[tokio::test]
async fn an_unnamed_provider_failure_is_still_retried_once() {
    // The fakes' own `fail` mode prints an overloaded (529) failure: worth one more try.
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&["fail", "reply"]);
        let (result, _) = run(&fake.harness(), fake.request(1)).await;
        assert!(
            matches!(result.outcome, WorkerOutcome::Verified { .. }),
            "{kind:?}: {:?}",
            result.outcome
        );
        assert_eq!(fake.invocations(), 2, "{kind:?}");
    }
}
