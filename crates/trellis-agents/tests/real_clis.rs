//! The real `claude`, `codex`, `copilot` and `pi` CLIs driven through the adapters on the gateway
//! lane, against the scripted loopback model server: a step node that writes a file and
//! returns its output, and a verifier whose first reply is malformed and corrected.
//!
//! Skipped (with a note) when the pinned CLIs are not installed, except under `CI`.

mod real_lab;

use real_lab::*;
use serde_json::json;
use trellis_agents::schema::reply_schema;
use trellis_agents::{HarnessEvent, HarnessKind, LogStream, TokenUsage};
use trellis_graph::WorkerOutcome;
use trellis_testkit::{Block, Conversation, Script, Turn, Usage};

async fn step_writes_a_file_and_is_verified(kind: HarnessKind) {
    let test = format!("{}_step_writes_a_file", kind.as_str());
    let Some(clis) = clis(&test, kind) else {
        return;
    };
    let step_body = match kind {
        HarnessKind::Claude | HarnessKind::Pi => json!({"count": 1}),
        _ => json!({"count": 1, "note": null}),
    };
    let script = Script::new(vec![
        Conversation::new("writer")
            .on_api(api(kind))
            .matching("graph node `writer`")
            .turn(
                Turn::reply(vec![Block::write_file(
                    "result.txt",
                    "hello from the agent\n",
                )])
                .with_usage(Usage {
                    cache_read_tokens: 40,
                    ..Usage::new(100, 20)
                }),
            )
            .turn(
                Turn::reply(vec![envelope(kind, step_body)])
                    .expecting(file_written_marker(kind))
                    .with_usage(Usage::new(200, 30)),
            ),
    ]);
    let lab = Lab::start(kind, clis, script).await;
    let (result, events) = lab.run(lab.request("writer", step_contract())).await;
    assert_eq!(
        result.outcome,
        WorkerOutcome::Verified {
            output: json!({"count": 1}),
            artifacts: vec![]
        },
        "{events:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(lab.workspace().join("result.txt")).unwrap(),
        "hello from the agent\n"
    );
    lab.assert_script_done(&events);
    let requests = lab.server.requests_for("writer");
    assert_eq!(requests.len(), 2);
    assert!(
        requests[0]
            .user_text
            .contains("Input JSON:\n{\"file\":\"result.txt\"}")
    );
    if kind != HarnessKind::Pi {
        // Claude, Codex and Copilot (its headless `responseFormat`) hand our schema to the
        // model; pi cannot.
        assert_eq!(
            requests[0].reply_schema.as_ref(),
            Some(&reply_schema(&step_contract(), dialect(kind)))
        );
    }
    let expected = match kind {
        // Claude sums both API calls; Anthropic input excludes cache reads.
        HarnessKind::Claude => TokenUsage {
            input_tokens: 300,
            output_tokens: 50,
            cache_read_tokens: 40,
            cache_write_tokens: 0,
            cost_usd: result.usage.cost_usd,
        },
        // Codex, Copilot and pi report 300 input including 40 cached.
        HarnessKind::Codex | HarnessKind::Copilot | HarnessKind::Pi => TokenUsage {
            input_tokens: 260,
            output_tokens: 50,
            cache_read_tokens: 40,
            cache_write_tokens: 0,
            cost_usd: None,
        },
    };
    assert_eq!(result.usage, expected, "{kind:?}");
    let logged = events.iter().any(|e| {
        matches!(
            e,
            HarnessEvent::Log {
                stream: LogStream::Output,
                ..
            }
        )
    });
    assert!(logged, "no agent activity was forwarded: {events:#?}");
    assert!(!format!("{events:?}").contains(KEY));
}

async fn verifier_reply_is_corrected_in_the_same_session(kind: HarnessKind) {
    let test = format!("{}_verifier_corrected", kind.as_str());
    let Some(clis) = clis(&test, kind) else {
        return;
    };
    let verdict = json!({"output": true, "signals": {"verdict": "accepted"}, "diagnostic": "result.txt is right"});
    let mut review = Conversation::new("review")
        .on_api(api(kind))
        .matching("graph node `review`")
        .turn(Turn::reply(vec![Block::text("It looks fine to me.")]).with_usage(Usage::new(50, 5)));
    if kind == HarnessKind::Claude {
        // Claude Code itself asks once more for the structured reply before giving up.
        review = review.turn(Turn::reply(vec![Block::text("Really, it is fine.")]));
    }
    let review = review.turn(
        Turn::reply(vec![envelope(kind, verdict)])
            .expecting("was rejected mechanically")
            .with_usage(Usage::new(70, 9)),
    );
    let lab = Lab::start(kind, clis, Script::new(vec![review])).await;
    let (result, events) = lab.run(lab.request("review", verifier_contract())).await;
    let WorkerOutcome::Verifier {
        output,
        signals,
        diagnostic,
        ..
    } = &result.outcome
    else {
        panic!("{kind:?}: {:?}\n{events:#?}", result.outcome);
    };
    assert_eq!(output, &json!(true));
    assert_eq!(diagnostic, &json!("result.txt is right"));
    assert_eq!(
        signals.values().map(|l| l.as_str()).collect::<Vec<_>>(),
        ["accepted"]
    );
    lab.assert_script_done(&events);
    let requests = lab.server.requests_for("review");
    let first = requests.first().unwrap();
    let last = requests.last().unwrap();
    assert!(
        last.latest_input.contains("not valid JSON"),
        "{}",
        last.latest_input
    );
    assert!(first.session.is_some());
    assert_eq!(
        first.session, last.session,
        "the correction must reuse the session"
    );
    assert!(events.iter().any(|e| matches!(
        e,
        HarnessEvent::Log { stream: LogStream::System, message, .. } if message.contains("asking for correction 1 of 2")
    )));
    assert!(result.usage.output_tokens >= 14, "{:?}", result.usage);
}

#[tokio::test]
async fn claude_step_writes_a_file_and_is_verified() {
    step_writes_a_file_and_is_verified(HarnessKind::Claude).await;
}

#[tokio::test]
async fn claude_verifier_reply_is_corrected_in_the_same_session() {
    verifier_reply_is_corrected_in_the_same_session(HarnessKind::Claude).await;
}

#[tokio::test]
async fn codex_step_writes_a_file_and_is_verified() {
    step_writes_a_file_and_is_verified(HarnessKind::Codex).await;
}

#[tokio::test]
async fn codex_verifier_reply_is_corrected_in_the_same_session() {
    verifier_reply_is_corrected_in_the_same_session(HarnessKind::Codex).await;
}

#[tokio::test]
async fn copilot_step_writes_a_file_and_is_verified() {
    step_writes_a_file_and_is_verified(HarnessKind::Copilot).await;
}

#[tokio::test]
async fn copilot_verifier_reply_is_corrected_in_the_same_session() {
    verifier_reply_is_corrected_in_the_same_session(HarnessKind::Copilot).await;
}

#[tokio::test]
async fn pi_step_writes_a_file_and_is_verified() {
    step_writes_a_file_and_is_verified(HarnessKind::Pi).await;
}

#[tokio::test]
async fn pi_verifier_reply_is_corrected_in_the_same_session() {
    verifier_reply_is_corrected_in_the_same_session(HarnessKind::Pi).await;
}
