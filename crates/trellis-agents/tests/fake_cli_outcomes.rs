//! Every outcome of the claude, codex and copilot adapters, driven through fake CLIs that print
//! each CLI's real event format: success, corrections, malformed, crash, refusal, provider
//! failures, deadline, idle limit, cancellation and startup failures.

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::*;
use tokio_util::sync::CancellationToken;
use trellis_agents::schema::{SchemaDialect, reply_schema};
use trellis_agents::{HarnessEvent, HarnessKind, LogStream, TokenUsage};
use trellis_graph::{FailureReason, WorkerErrorCode, WorkerOutcome};

fn verified_count(n: i64) -> WorkerOutcome {
    WorkerOutcome::Verified {
        output: json!({"count": n}),
        artifacts: vec![],
    }
}

fn error_code(outcome: &WorkerOutcome) -> Option<WorkerErrorCode> {
    outcome.error_code()
}

/// Usage of one turn of the fake, as the harness should account it.
fn one_turn_usage(kind: HarnessKind) -> TokenUsage {
    match kind {
        HarnessKind::Claude => TokenUsage {
            input_tokens: 100,
            output_tokens: 20,
            cache_read_tokens: 5,
            cache_write_tokens: 3,
            cost_usd: Some(0.25),
        },
        // 100 input of which 20 cached, 10 output per turn (reported as running totals).
        HarnessKind::Codex => TokenUsage {
            input_tokens: 80,
            output_tokens: 10,
            cache_read_tokens: 20,
            cache_write_tokens: 0,
            cost_usd: None,
        },
        HarnessKind::Copilot | HarnessKind::Pi => unreachable!("no prompt-mode fake for {kind:?}"),
    }
}

fn times(usage: TokenUsage, n: u64) -> TokenUsage {
    TokenUsage {
        input_tokens: usage.input_tokens * n,
        output_tokens: usage.output_tokens * n,
        cache_read_tokens: usage.cache_read_tokens * n,
        cache_write_tokens: usage.cache_write_tokens * n,
        cost_usd: usage.cost_usd.map(|c| c * n as f64),
    }
}

fn usage_events(events: &[HarnessEvent]) -> TokenUsage {
    let mut total = TokenUsage::default();
    for event in events {
        if let HarnessEvent::Usage(u) = event {
            total.add(u);
        }
    }
    total
}

#[tokio::test]
async fn a_good_reply_is_verified_with_usage_model_effort_and_schema() {
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&["reply"]);
        let request = fake.request(1);
        let scratch = request.scratch.clone();
        let (result, events) = run(&fake.harness(), request).await;
        assert_eq!(result.outcome, verified_count(3), "{kind:?}: {events:?}");
        assert_eq!(result.usage, one_turn_usage(kind), "{kind:?}");
        assert_eq!(usage_events(&events), result.usage, "{kind:?}");
        assert_eq!(fake.invocations(), 1);
        assert_eq!(
            fake.state_file("cwd.1").trim(),
            fake.path("ws").display().to_string()
        );
        let prompt = fake.stdin(1);
        assert!(
            prompt.starts_with("Execute the Trellis graph node `code`"),
            "{prompt}"
        );
        assert!(prompt.contains("Input JSON:\n{\"task\":\"count the files\"}\n"));
        let argv = fake.argv(1);
        let joined = argv.join(" ");
        match kind {
            HarnessKind::Claude => {
                assert!(
                    joined.contains("--model test-model --effort high"),
                    "{joined}"
                );
                let at = argv.iter().position(|a| a == "--json-schema").unwrap();
                assert_eq!(
                    value_of(&argv[at + 1]),
                    reply_schema(&fake.request(1).contract, SchemaDialect::Standard)
                );
                assert!(!joined.contains("--resume"));
            }
            HarnessKind::Codex => {
                assert_eq!(&argv[..1], ["exec"]);
                assert!(joined.contains("--model test-model"), "{joined}");
                assert!(joined.contains(r#"model_reasoning_effort="high""#));
                assert!(joined.contains(r#"sandbox_mode="workspace-write""#));
                assert_eq!(argv.last().map(String::as_str), Some("-"));
                let schema = value_of(&fake.state_file("schema.1"));
                assert_eq!(
                    schema,
                    reply_schema(&fake.request(1).contract, SchemaDialect::OpenAiStrict)
                );
                assert!(scratch.join("reply-schema.json").is_file());
            }
            HarnessKind::Copilot | HarnessKind::Pi => {
                unreachable!("no prompt-mode fake for {kind:?}")
            }
        }
        assert!(has_log(&events, LogStream::Output, "ls") || kind == HarnessKind::Claude);
        assert!(
            events
                .iter()
                .any(|e| matches!(e, HarnessEvent::Started { .. }))
        );
    }
}

#[tokio::test]
async fn a_rejected_reply_is_corrected_in_the_same_session() {
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&["bad", "reply"]);
        let (result, events) = run(&fake.harness(), fake.request(1)).await;
        assert_eq!(result.outcome, verified_count(3), "{kind:?}: {events:?}");
        assert_eq!(fake.invocations(), 2);
        let correction = fake.stdin(2);
        assert!(
            correction
                .starts_with("Your previous reply was rejected mechanically and was not passed on"),
            "{correction}"
        );
        assert!(correction.contains("Validation error:\n"));
        assert!(correction.contains("{\"kind\":\"worker\",\"output\":{\"kind\":\"record\""));
        let argv = fake.argv(2);
        match kind {
            HarnessKind::Claude => {
                let at = argv.iter().position(|a| a == "--resume").unwrap();
                assert_eq!(argv[at + 1], "sess-1");
                // Declared fields are checked before undeclared ones (the reference's order).
                assert!(
                    correction.contains("missing required field count"),
                    "{correction}"
                );
            }
            HarnessKind::Codex => {
                assert_eq!(&argv[..2], ["exec", "resume"]);
                assert_eq!(&argv[argv.len() - 2..], ["thread-1", "-"]);
                // The schema goes along with every resumed turn.
                assert_eq!(fake.state_file("schema.2"), fake.state_file("schema.1"));
                assert!(correction.contains("not valid JSON"), "{correction}");
            }
            HarnessKind::Copilot | HarnessKind::Pi => {
                unreachable!("no prompt-mode fake for {kind:?}")
            }
        }
        assert!(has_log(
            &events,
            LogStream::System,
            "asking for correction 1 of 2"
        ));
        // Usage of both turns; for Codex and Copilot the second report is a running total.
        assert_eq!(result.usage, times(one_turn_usage(kind), 2), "{kind:?}");
        assert_eq!(usage_events(&events), result.usage);
    }
}

#[tokio::test]
async fn a_third_rejected_reply_settles_malformed() {
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&["bad", "bad", "bad", "reply"]);
        let (result, events) = run(&fake.harness(), fake.request(1)).await;
        assert_eq!(
            result.outcome,
            WorkerOutcome::Error {
                code: WorkerErrorCode::Malformed,
                reason: FailureReason::MalformedResult
            },
            "{kind:?}"
        );
        assert_eq!(fake.invocations(), 3);
        assert!(has_log(
            &events,
            LogStream::System,
            "reply rejected after 2 corrections"
        ));
        assert!(has_log(&events, LogStream::System, "settled malformed"));
        assert_eq!(result.usage, times(one_turn_usage(kind), 3), "{kind:?}");
    }
}

#[tokio::test]
async fn a_cli_dying_mid_stream_is_a_crash() {
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&["crash"]);
        let (result, events) = run(&fake.harness(), fake.request(1)).await;
        assert_eq!(
            error_code(&result.outcome),
            Some(WorkerErrorCode::Crash),
            "{kind:?}"
        );
        assert!(
            has_log(&events, LogStream::System, "was killed by signal 9"),
            "{events:?}"
        );
        assert_eq!(fake.invocations(), 1);
    }
}

#[tokio::test]
async fn a_refusal_envelope_settles_refusal() {
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&["refuse"]);
        let (result, events) = run(&fake.harness(), fake.request(1)).await;
        assert_eq!(
            result.outcome,
            WorkerOutcome::Error {
                code: WorkerErrorCode::Refusal,
                reason: FailureReason::DeclaredFailure
            },
            "{kind:?}: {events:?}"
        );
        assert!(has_log(
            &events,
            LogStream::System,
            "the agent refused the task: no access to the repository"
        ));
        assert_eq!(fake.invocations(), 1);
    }
}

#[tokio::test]
async fn a_provider_failure_is_retried_once_with_continue() {
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&["fail", "reply"]);
        let (result, events) = run(&fake.harness(), fake.request(1)).await;
        assert_eq!(result.outcome, verified_count(3), "{kind:?}: {events:?}");
        assert_eq!(fake.stdin(2), "Continue");
        let label = match kind {
            HarnessKind::Claude => "Claude provider failure: API Error: 529",
            HarnessKind::Codex => "Codex provider failure: unexpected status 400",
            HarnessKind::Copilot | HarnessKind::Pi => {
                unreachable!("no prompt-mode fake for {kind:?}")
            }
        };
        assert!(
            has_log(&events, LogStream::Error, label),
            "{kind:?}: {events:?}"
        );

        let twice = Fake::new(kind);
        twice.turns(&["fail", "fail", "reply"]);
        let (result, events) = run(&twice.harness(), twice.request(1)).await;
        assert_eq!(
            error_code(&result.outcome),
            Some(WorkerErrorCode::Crash),
            "{kind:?}"
        );
        assert_eq!(twice.invocations(), 2);
        assert!(has_log(
            &events,
            LogStream::System,
            "second provider failure"
        ));
    }
}

#[tokio::test]
async fn the_deadline_stops_a_hanging_agent_as_timeout() {
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&["hang"]);
        let mut request = fake.request(1);
        request.deadline = Some(Duration::from_millis(800));
        let started = Instant::now();
        let (result, events) = run(&fake.harness(), request).await;
        assert_eq!(
            error_code(&result.outcome),
            Some(WorkerErrorCode::Timeout),
            "{kind:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(6));
        assert!(has_log(
            &events,
            LogStream::System,
            "deadline (timeoutMs) passed"
        ));
    }
}

#[tokio::test]
async fn a_silent_agent_is_warned_then_stopped_at_the_idle_limit() {
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&["silent"]);
        let mut request = fake.request(1);
        request.idle_timeout = Some(Duration::from_secs(2));
        let (result, events) = run(&fake.harness(), request).await;
        assert_eq!(
            error_code(&result.outcome),
            Some(WorkerErrorCode::Timeout),
            "{kind:?}"
        );
        assert!(
            has_log(
                &events,
                LogStream::System,
                "no output for 1s from node code"
            ),
            "{events:?}"
        );
        assert!(has_log(
            &events,
            LogStream::System,
            "idle limit (idleTimeoutMs) passed"
        ));
    }
}

#[tokio::test]
async fn cancellation_stops_the_agent_as_refusal() {
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&["hang"]);
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            trigger.cancel();
        });
        let (result, _) = run_with(&fake.harness(), fake.request(1), cancel).await;
        assert_eq!(
            error_code(&result.outcome),
            Some(WorkerErrorCode::Refusal),
            "{kind:?}"
        );
    }
}

#[tokio::test]
async fn startup_failures_are_crashes() {
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&["exit3"]);
        let (result, events) = run(&fake.harness(), fake.request(1)).await;
        assert_eq!(
            error_code(&result.outcome),
            Some(WorkerErrorCode::Crash),
            "{kind:?}"
        );
        assert!(has_log(
            &events,
            LogStream::System,
            "before printing any event"
        ));
        assert!(has_log(
            &events,
            LogStream::Error,
            "fatal: cannot start (scripted)"
        ));

        let mut request = fake.request(2);
        request.base_env[0].1 = "/usr/bin:/bin".into();
        let (result, events) = run(&fake.harness(), request).await;
        assert_eq!(error_code(&result.outcome), Some(WorkerErrorCode::Crash));
        assert!(
            has_log(&events, LogStream::System, "is not installed"),
            "{events:?}"
        );
    }
}

#[tokio::test]
async fn verifiers_get_read_only_tooling_and_return_the_triple() {
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&["reply"]);
        fake.reply(match kind {
            HarnessKind::Claude => {
                r#"{"response":{"output":true,"signals":{"verdict":"accepted"},"diagnostic":"looks right"}}"#
            }
            _ => {
                r#"{"response":{"output":true,"signals":{"verdict":"accepted"},"diagnostic":"looks right"},"refusal":null}"#
            }
        });
        let mut request = fake.request(1);
        request.contract = verifier_contract();
        let (result, events) = run(&fake.harness(), request).await;
        let WorkerOutcome::Verifier {
            output,
            signals,
            diagnostic,
            ..
        } = result.outcome
        else {
            panic!("{kind:?}: {events:?}");
        };
        assert_eq!((output, diagnostic), (json!(true), json!("looks right")));
        assert_eq!(
            signals.values().next().map(|l| l.as_str()),
            Some("accepted")
        );
        let joined = fake.argv(1).join(" ");
        let read_only = match kind {
            HarnessKind::Claude => "--disallowed-tools=Write,Edit,NotebookEdit",
            HarnessKind::Codex => r#"sandbox_mode="read-only""#,
            HarnessKind::Copilot | HarnessKind::Pi => {
                unreachable!("no prompt-mode fake for {kind:?}")
            }
        };
        assert!(joined.contains(read_only), "{joined}");
        assert!(
            fake.stdin(1)
                .contains("Do not create, modify or delete any file")
        );
    }
}

#[tokio::test]
async fn long_sessions_are_streamed_and_over_long_events_skipped() {
    let fake = Fake::new(HarnessKind::Claude);
    fake.turns(&["flood"]);
    let (result, events) = run(&fake.harness(), fake.request(1)).await;
    assert_eq!(
        result.outcome,
        verified_count(3),
        "{:?}",
        logs(&events).len()
    );
    assert!(has_log(
        &events,
        LogStream::System,
        "an event longer than 1048576 bytes was skipped"
    ));
    // Each forwarded line stays bounded however long the event was.
    assert!(
        logs(&events)
            .iter()
            .all(|(_, m)| m.len() <= trellis_agents::forward::MAX_LOG_MESSAGE_BYTES)
    );
}
