//! Sessions and environment of the agent adapters, through fake CLIs: `sessionScope`
//! semantics, lane variables per CLI, missing credentials, and a canary secret that must never
//! leave the child's environment.

mod support;

use std::collections::BTreeMap;

use support::*;
use trellis_agents::{HarnessEvent, HarnessKind, LogStream, Provider, SessionScope, TokenUsage};
use trellis_graph::{FailureReason, WorkerErrorCode, WorkerOutcome};

const CANARY: &str = "canary-connection-secret-d41d8c";

#[tokio::test]
async fn a_canary_secret_never_leaves_the_child_environment() {
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&["echoenv"]);
        let mut request = fake.request(1);
        set_binding(&mut request, |b| {
            b.connections
                .insert("extra".into(), vec!["CANARY_TOKEN".into()]);
        });
        let mut values: BTreeMap<String, String> = request
            .environment
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        values.insert("CANARY_TOKEN".into(), CANARY.into());
        request.environment = trellis_agents::SecretEnv::new(values);
        let scratch = request.scratch.clone();
        let (result, events) = run(&fake.harness(), request).await;
        assert!(
            matches!(result.outcome, WorkerOutcome::Verified { .. }),
            "{kind:?}: {events:?}"
        );

        // The child saw both values (so the test is not vacuous) ...
        let env = fake.env(1);
        assert_eq!(env.get("CANARY_TOKEN").map(String::as_str), Some(CANARY));
        let key_var = match kind {
            HarnessKind::Claude => "ANTHROPIC_API_KEY",
            HarnessKind::Codex => "GATEWAY_API_KEY",
            HarnessKind::Copilot | HarnessKind::Pi => {
                unreachable!("no prompt-mode fake for {kind:?}")
            }
        };
        assert_eq!(env.get(key_var).map(String::as_str), Some(GATEWAY_KEY));
        // ... and echoed them on stdout and stderr, which reached the log only redacted.
        assert!(has_log(
            &events,
            LogStream::Error,
            "stderr sees key [REDACTED] and canary [REDACTED]"
        ));
        assert!(has_log(
            &events,
            LogStream::Output,
            "I can see [REDACTED] and [REDACTED]"
        ));
        let everything = format!("{events:?}");
        for secret in [CANARY, GATEWAY_KEY] {
            assert!(
                !everything.contains(secret),
                "{kind:?}: event leaked {secret}"
            );
            let argv = fake.state_file("argv.1");
            assert!(!argv.contains(secret), "{kind:?}: argv leaked {secret}");
            assert!(!fake.stdin(1).contains(secret));
            // Everything the harness (or the CLI through it) wrote: scratch, homes, workspace;
            // only the fake's own records of what it received are exempt.
            let written: Vec<_> = files_under(fake.root.path())
                .into_iter()
                .filter(|f| !f.starts_with(fake.path("state")))
                .collect();
            if kind != HarnessKind::Claude {
                assert!(
                    written.iter().any(|f| f.starts_with(&scratch)),
                    "{written:?}"
                );
            }
            for file in written {
                let bytes = std::fs::read(&file).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(secret),
                    "{kind:?}: {} holds {secret}",
                    file.display()
                );
            }
        }
    }
}

#[tokio::test]
async fn the_child_gets_a_cleared_environment_with_the_lane_variables() {
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&["reply"]);
        let request = fake.request(1);
        let scratch = request.scratch.clone();
        let (result, _) = run(&fake.harness(), request).await;
        assert!(matches!(result.outcome, WorkerOutcome::Verified { .. }));
        let env = fake.env(1);
        let home = scratch.join("home");
        assert_eq!(env["HOME"], home.display().to_string(), "{kind:?}");
        assert_eq!(env["TMPDIR"], home.join("tmp").display().to_string());
        assert_eq!(env["LANG"], "C.UTF-8");
        assert_eq!(env["GATEWAY_BASE_URL"], GATEWAY_URL);
        for absent in ["SHELL", "UNDECLARED_SECRET"] {
            assert!(!env.contains_key(absent), "{kind:?}: {absent} leaked");
        }
        let argv = fake.argv(1).join(" ");
        match kind {
            HarnessKind::Claude => {
                assert_eq!(env["ANTHROPIC_BASE_URL"], GATEWAY_URL);
                assert_eq!(env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"], "1");
            }
            HarnessKind::Codex => {
                assert_eq!(env["CODEX_HOME"], home.join(".codex").display().to_string());
                assert!(home.join(".codex").is_dir());
                assert!(argv.contains(&format!(
                    "model_providers.gateway.base_url=\"{GATEWAY_URL}\""
                )));
                assert!(argv.contains(r#"model_providers.gateway.env_key="GATEWAY_API_KEY""#));
                assert!(argv.contains("analytics.enabled=false"));
            }
            HarnessKind::Copilot | HarnessKind::Pi => {
                unreachable!("no prompt-mode fake for {kind:?}")
            }
        }
    }
}

#[tokio::test]
async fn native_lanes_reuse_the_real_home_and_map_declared_keys() {
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&["reply"]);
        let (provider, declared, child_var) = match kind {
            HarnessKind::Claude => (
                Provider::Anthropic,
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_API_KEY",
            ),
            HarnessKind::Codex => (Provider::Openai, "OPENAI_API_KEY", "CODEX_API_KEY"),
            HarnessKind::Copilot | HarnessKind::Pi => {
                unreachable!("no prompt-mode fake for {kind:?}")
            }
        };
        let mut request = fake.request(1);
        set_binding(&mut request, |b| {
            b.connections =
                BTreeMap::from([(provider.as_str().to_owned(), vec![declared.to_owned()])]);
            b.model = String::new();
        });
        request.environment = trellis_agents::SecretEnv::new(BTreeMap::from([(
            declared.to_owned(),
            "native-key-value-9".to_owned(),
        )]));
        let (result, events) = run(&fake.harness_on(provider), request).await;
        assert!(
            matches!(result.outcome, WorkerOutcome::Verified { .. }),
            "{kind:?}: {events:?}"
        );
        let env = fake.env(1);
        assert_eq!(
            env["HOME"],
            fake.path("home").display().to_string(),
            "{kind:?}"
        );
        assert_eq!(env[child_var], "native-key-value-9");
        if kind == HarnessKind::Codex {
            assert!(!env.contains_key("OPENAI_API_KEY"));
        }
        let argv = fake.argv(1).join(" ");
        assert!(!argv.contains("--model"), "{argv}");
        assert!(!argv.contains("model_provider"), "{argv}");
        assert!(!argv.contains("native-key-value-9"));
    }
}

#[tokio::test]
async fn missing_connection_values_settle_authentication_required() {
    for kind in ALL {
        let fake = Fake::new(kind);
        let mut request = fake.request(1);
        request.environment = trellis_agents::SecretEnv::new(BTreeMap::from([(
            "GATEWAY_BASE_URL".to_owned(),
            GATEWAY_URL.to_owned(),
        )]));
        let (result, events) = run(&fake.harness(), request).await;
        assert_eq!(
            result.outcome,
            WorkerOutcome::Error {
                code: WorkerErrorCode::Refusal,
                reason: FailureReason::AuthenticationRequired
            }
        );
        assert!(has_log(
            &events,
            LogStream::System,
            "connection values are unavailable: GATEWAY_API_KEY"
        ));
        assert_eq!(fake.invocations(), 0);
    }
}

#[tokio::test]
async fn node_instance_sessions_survive_a_malformed_reply_and_restart_after_a_crash() {
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&[
            "reply", "reply", "bad", "bad", "bad", "reply", "exit3", "reply",
        ]);
        let harness = fake.harness();
        let scoped = |execution: u64| {
            let mut request = fake.request(execution);
            set_binding(&mut request, |b| {
                b.session_scope = SessionScope::NodeInstance
            });
            request
        };
        let resumes_first_session = |invocation: u32| {
            let argv = fake.argv(invocation).join(" ");
            match kind {
                HarnessKind::Claude => argv.contains("--resume sess-1"),
                HarnessKind::Codex => {
                    argv.starts_with("exec resume") && argv.ends_with("thread-1 -")
                }
                HarnessKind::Copilot | HarnessKind::Pi => {
                    unreachable!("no prompt-mode fake for {kind:?}")
                }
            }
        };
        let (first, _) = run(&harness, scoped(1)).await;
        assert!(matches!(first.outcome, WorkerOutcome::Verified { .. }));
        let (second, events) = run(&harness, scoped(2)).await;
        assert!(
            matches!(second.outcome, WorkerOutcome::Verified { .. }),
            "{events:?}"
        );
        // The second execution continues the first one's session with a full prompt.
        assert!(resumes_first_session(2), "{kind:?}: {:?}", fake.argv(2));
        assert!(fake.stdin(2).starts_with("Execute the Trellis graph node"));
        // Both executions live in the session's private home, outside any scratch directory.
        assert_eq!(fake.env(1)["HOME"], fake.env(2)["HOME"]);
        assert!(fake.env(2)["HOME"].starts_with(&fake.path("sessions").display().to_string()));
        // Running totals continue across executions; each execution is charged its own turn.
        assert_eq!(second.usage, first.usage, "{kind:?}");

        // A malformed reply keeps the conversation: the next execution resumes it (as the
        // reference does).
        let (third, _) = run(&harness, scoped(3)).await;
        assert_eq!(third.outcome.error_code(), Some(WorkerErrorCode::Malformed));
        assert_eq!(fake.invocations(), 5);
        let (fourth, events) = run(&harness, scoped(4)).await;
        assert!(
            matches!(fourth.outcome, WorkerOutcome::Verified { .. }),
            "{events:?}"
        );
        assert!(resumes_first_session(6), "{kind:?}: {:?}", fake.argv(6));
        assert!(fake.stdin(6).starts_with("Execute the Trellis graph node"));

        // A crash drops it: the next execution starts a fresh session in a fresh home.
        let (fifth, _) = run(&harness, scoped(5)).await;
        assert_eq!(fifth.outcome.error_code(), Some(WorkerErrorCode::Crash));
        let (sixth, events) = run(&harness, scoped(6)).await;
        assert!(
            matches!(sixth.outcome, WorkerOutcome::Verified { .. }),
            "{events:?}"
        );
        assert_eq!(fake.invocations(), 8, "the fresh session started a process");
        assert!(!resumes_first_session(8), "{kind:?}: {:?}", fake.argv(8));
        assert!(!fake.argv(8).join(" ").contains("resume"), "{kind:?}");
        assert!(fake.stdin(8).starts_with("Execute the Trellis graph node"));

        // Another node instance is unaffected, and closing the run forgets everything.
        let mut other = scoped(7);
        other.node_instance = 2;
        fake.turns(&[
            "reply", "reply", "bad", "bad", "bad", "reply", "exit3", "reply", "reply", "reply",
        ]);
        let (seventh, _) = run(&harness, other).await;
        assert!(matches!(seventh.outcome, WorkerOutcome::Verified { .. }));
        trellis_agents::Harness::close_run(&harness, "run-1");
        let (eighth, _) = run(&harness, scoped(8)).await;
        assert!(matches!(eighth.outcome, WorkerOutcome::Verified { .. }));
        assert!(!fake.argv(10).join(" ").contains("resume"), "{kind:?}");
    }
}

#[tokio::test]
async fn a_session_claude_no_longer_holds_is_a_crash_without_retry() {
    let fake = Fake::new(HarnessKind::Claude);
    fake.turns(&["reply", "lost", "reply"]);
    let harness = fake.harness();
    let scoped = |execution: u64| {
        let mut request = fake.request(execution);
        set_binding(&mut request, |b| {
            b.session_scope = SessionScope::NodeInstance
        });
        request
    };
    run(&harness, scoped(1)).await;
    let (result, events) = run(&harness, scoped(2)).await;
    assert_eq!(result.outcome.error_code(), Some(WorkerErrorCode::Crash));
    assert!(has_log(
        &events,
        LogStream::System,
        "claude lost the session: No conversation found with session ID: sess-1"
    ));
    assert_eq!(fake.invocations(), 2, "a lost session is not retried");
}

#[tokio::test]
async fn execution_scope_starts_a_fresh_session_every_time() {
    for kind in ALL {
        let fake = Fake::new(kind);
        fake.turns(&["reply", "reply"]);
        let harness = fake.harness();
        run(&harness, fake.request(1)).await;
        let (second, _) = run(&harness, fake.request(2)).await;
        assert!(matches!(second.outcome, WorkerOutcome::Verified { .. }));
        let argv = fake.argv(2).join(" ");
        assert!(!argv.contains("resume"), "{kind:?}: {argv}");
        assert_ne!(fake.env(1)["HOME"], fake.env(2)["HOME"]);
    }
}

#[tokio::test]
async fn codex_running_totals_are_charged_as_increments() {
    let fake = Fake::new(HarnessKind::Codex);
    fake.turns(&["bad", "fail", "reply"]);
    let (result, events) = run(&fake.harness(), fake.request(1)).await;
    assert!(
        matches!(result.outcome, WorkerOutcome::Verified { .. }),
        "{events:?}"
    );
    // Three invocations of one thread report totals 100, (none: failed turn), 300 input.
    let increments: Vec<TokenUsage> = events
        .iter()
        .filter_map(|e| match e {
            HarnessEvent::Usage(u) => Some(*u),
            _ => None,
        })
        .collect();
    assert_eq!(
        increments
            .iter()
            .map(|u| u.input_tokens + u.cache_read_tokens)
            .collect::<Vec<_>>(),
        vec![100, 200]
    );
    assert_eq!(result.usage.input_tokens, 240);
    assert_eq!(result.usage.cache_read_tokens, 60);
    assert_eq!(result.usage.output_tokens, 30);
}

#[tokio::test]
async fn openrouter_and_bedrock_lanes_hand_their_credentials_over() {
    let cases = [
        (HarnessKind::Claude, Provider::Openrouter),
        (HarnessKind::Codex, Provider::Openrouter),
        (HarnessKind::Claude, Provider::Bedrock),
        (HarnessKind::Codex, Provider::Bedrock),
    ];
    for (kind, provider) in cases {
        let fake = Fake::new(kind);
        fake.turns(&["reply"]);
        let mut request = fake.request(1);
        let names: &[&str] = match provider {
            Provider::Openrouter => &["OPENROUTER_API_KEY"],
            _ => &["AWS_BEARER_TOKEN_BEDROCK", "AWS_REGION"],
        };
        set_binding(&mut request, |b| {
            b.connections = BTreeMap::from([(
                provider.as_str().to_owned(),
                names.iter().map(|n| n.to_string()).collect(),
            )]);
        });
        request.environment = trellis_agents::SecretEnv::new(
            names
                .iter()
                .map(|n| (n.to_string(), format!("value-of-{n}")))
                .collect(),
        );
        let (result, events) = run(&fake.harness_on(provider), request).await;
        assert!(
            matches!(result.outcome, WorkerOutcome::Verified { .. }),
            "{kind:?} {provider:?}: {events:?}"
        );
        let env = fake.env(1);
        let argv = fake.argv(1).join(" ");
        // A private home, never the user's.
        assert!(
            env["HOME"].ends_with("scratch-1/home"),
            "{kind:?} {provider:?}"
        );
        match (kind, provider) {
            (HarnessKind::Claude, Provider::Openrouter) => {
                assert_eq!(env["ANTHROPIC_BASE_URL"], "https://openrouter.ai/api");
                assert_eq!(env["ANTHROPIC_AUTH_TOKEN"], "value-of-OPENROUTER_API_KEY");
                assert_eq!(env["ANTHROPIC_API_KEY"], "");
            }
            (HarnessKind::Codex, Provider::Openrouter) => {
                assert!(argv.contains(r#"model_provider="openrouter""#), "{argv}");
                assert!(argv.contains(
                    r#"model_providers.openrouter.base_url="https://openrouter.ai/api/v1""#
                ));
                assert!(
                    argv.contains(r#"model_providers.openrouter.env_key="OPENROUTER_API_KEY""#)
                );
                assert_eq!(env["OPENROUTER_API_KEY"], "value-of-OPENROUTER_API_KEY");
            }
            (HarnessKind::Claude, _) => {
                assert_eq!(env["CLAUDE_CODE_USE_BEDROCK"], "1");
                assert_eq!(env["AWS_REGION"], "value-of-AWS_REGION");
            }
            _ => {
                assert!(
                    argv.contains(r#"model_provider="amazon-bedrock""#),
                    "{argv}"
                );
                assert_eq!(
                    env["AWS_BEARER_TOKEN_BEDROCK"],
                    "value-of-AWS_BEARER_TOKEN_BEDROCK"
                );
            }
        }
        assert!(!argv.contains("value-of-"), "{argv}");
    }
}
