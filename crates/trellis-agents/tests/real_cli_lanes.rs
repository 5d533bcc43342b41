//! The real Copilot and pi CLIs on their other lanes and failure paths, against the scripted
//! loopback model server: Copilot's provider registry with a token fetched per request, pi's
//! declared Anthropic endpoint, a silent model stopped by the idle limit, and a refused key
//! named `authentication_required`.
//!
//! Skipped (with a note) when the pinned CLIs are not installed, except under `CI`.

mod real_lab;

use std::collections::BTreeMap;
use std::time::Duration;

use real_lab::*;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use trellis_agents::{
    AgentHarness, AgentLane, AgentOptions, Binding, Harness, HarnessEvent, HarnessKind, LogStream,
    Provider, SecretEnv,
};
use trellis_graph::WorkerOutcome;
use trellis_testkit::cli::{DEFAULT_CLAUDE_MODEL, DEFAULT_CODEX_MODEL};
use trellis_testkit::{Api, Block, Conversation, Hang, Script, Turn};

/// Copilot on its `github` lane with no GitHub login at all: a declared provider registry
/// (`COPILOT_PROVIDERS_CONFIG`) routes `corp/<model>` to the scripted server, and the
/// provider's `apiKeyCommand` runs before every model request, so each request (the first
/// reply, then its correction) carries the token the command prints at that moment.
#[tokio::test]
async fn copilot_provider_registry_fetches_a_fresh_token_per_request() {
    let kind = HarnessKind::Copilot;
    let Some(clis) = clis("copilot_provider_registry", kind) else {
        return;
    };
    let script = Script::new(vec![
        Conversation::new("writer")
            .on_api(Api::Openai)
            .matching("graph node `writer`")
            .turn(Turn::reply(vec![Block::text("One line, I think.")]))
            .turn(
                Turn::reply(vec![envelope(kind, json!({"count": 1, "note": null}))])
                    .expecting("was rejected mechanically"),
            ),
    ]);
    let lab = Lab::start(kind, clis, script).await;
    let counter = lab.root.path().join("token-counter");
    let command = format!(
        "n=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}; printf rotating-token-$n",
        c = counter.display()
    );
    let registry = json!({"providers": [{"name": "corp", "type": "openai", "wireApi": "responses",
        "baseUrl": lab.server.openai_base_url(), "apiKeyCommand": command}],
        "models": [{"id": DEFAULT_CODEX_MODEL, "provider": "corp"}]});
    let harness = AgentHarness::new(
        AgentLane::new(kind, Provider::Github).unwrap(),
        AgentOptions {
            program: None,
            session_root: Some(lab.root.path().join("sessions")),
            sandbox: None,
        },
    );
    let mut request = lab.request("writer", step_contract());
    let Binding::Agent(binding) = &mut request.binding else {
        unreachable!()
    };
    binding.model = format!("corp/{DEFAULT_CODEX_MODEL}");
    binding.connections = BTreeMap::from([(
        "copilot_providers".to_owned(),
        vec!["COPILOT_PROVIDERS_CONFIG".to_owned()],
    )]);
    request.environment = SecretEnv::new(BTreeMap::from([(
        "COPILOT_PROVIDERS_CONFIG".to_owned(),
        registry.to_string(),
    )]));
    let (tx, mut rx) = mpsc::channel(8192);
    let result = harness.execute(request, tx, CancellationToken::new()).await;
    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(event);
    }
    assert_eq!(
        result.outcome,
        WorkerOutcome::Verified {
            output: json!({"count": 1}),
            artifacts: vec![]
        },
        "{events:#?}"
    );
    lab.assert_script_done(&events);
    let tokens: Vec<Option<String>> = lab
        .server
        .requests_for("writer")
        .iter()
        .map(|r| r.headers.get("authorization").cloned())
        .collect();
    assert_eq!(
        tokens,
        [
            Some("Bearer rotating-token-1".to_owned()),
            Some("Bearer rotating-token-2".to_owned())
        ]
    );
    assert!(!format!("{events:?}").contains("rotating-token"));
}

/// A model that never answers: the idle limit stops the CLI (Copilot's live connection
/// included) and the execution settles `timeout`.
async fn a_silent_model_hits_the_idle_limit(kind: HarnessKind) {
    let test = format!("{}_idle_limit", kind.as_str());
    let Some(clis) = clis(&test, kind) else {
        return;
    };
    let script = Script::new(vec![
        Conversation::new("writer")
            .on_api(api(kind))
            .matching("graph node `writer`")
            .turn(Turn::hang(Hang::NoResponse)),
    ]);
    let lab = Lab::start(kind, clis, script).await;
    let mut request = lab.request("writer", step_contract());
    request.idle_timeout = Some(Duration::from_secs(4));
    let started = std::time::Instant::now();
    let (result, events) = lab.run(request).await;
    assert_eq!(
        result.outcome,
        WorkerOutcome::failure(trellis_graph::WorkerErrorCode::Timeout),
        "{events:#?}"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(events.iter().any(|e| matches!(
        e,
        HarnessEvent::Log { message, .. } if message.contains("idle limit")
    )));
}

#[tokio::test]
async fn copilot_silent_model_hits_the_idle_limit() {
    a_silent_model_hits_the_idle_limit(HarnessKind::Copilot).await;
}

#[tokio::test]
async fn pi_silent_model_hits_the_idle_limit() {
    a_silent_model_hits_the_idle_limit(HarnessKind::Pi).await;
}

/// pi on its `anthropic` lane with a declared `ANTHROPIC_BASE_URL` and `ANTHROPIC_API_KEY`
/// (the reference's caller-owned endpoint): it speaks Anthropic Messages to the scripted
/// server with the declared key.
#[tokio::test]
async fn pi_anthropic_lane_uses_a_declared_endpoint() {
    let kind = HarnessKind::Pi;
    let Some(clis) = clis("pi_anthropic_endpoint", kind) else {
        return;
    };
    let script = Script::new(vec![
        Conversation::new("writer")
            .on_api(Api::Anthropic)
            .matching("graph node `writer`")
            .turn(Turn::reply(vec![Block::write_file("result.txt", "hi\n")]))
            .turn(
                Turn::reply(vec![envelope(kind, json!({"count": 1}))])
                    .expecting("Successfully wrote 3 bytes"),
            ),
    ]);
    let lab = Lab::start(kind, clis, script).await;
    let harness = AgentHarness::new(
        AgentLane::new(kind, Provider::Anthropic).unwrap(),
        AgentOptions {
            program: None,
            session_root: Some(lab.root.path().join("sessions")),
            sandbox: None,
        },
    );
    let mut request = lab.request("writer", step_contract());
    let Binding::Agent(binding) = &mut request.binding else {
        unreachable!()
    };
    binding.model = DEFAULT_CLAUDE_MODEL.to_owned();
    binding.connections = BTreeMap::from([(
        "anthropic".to_owned(),
        vec![
            "ANTHROPIC_API_KEY".to_owned(),
            "ANTHROPIC_BASE_URL".to_owned(),
        ],
    )]);
    request.environment = SecretEnv::new(BTreeMap::from([
        ("ANTHROPIC_API_KEY".to_owned(), KEY.to_owned()),
        ("ANTHROPIC_BASE_URL".to_owned(), lab.server.url()),
    ]));
    let (tx, mut rx) = mpsc::channel(8192);
    let result = harness.execute(request, tx, CancellationToken::new()).await;
    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(event);
    }
    assert_eq!(
        result.outcome,
        WorkerOutcome::Verified {
            output: json!({"count": 1}),
            artifacts: vec![]
        },
        "{events:#?}"
    );
    lab.assert_script_done(&events);
    assert_eq!(
        std::fs::read_to_string(lab.workspace().join("result.txt")).unwrap(),
        "hi\n"
    );
    let requests = lab.server.requests_for("writer");
    assert!(
        requests
            .iter()
            .all(|r| r.headers.get("x-api-key").map(String::as_str) == Some(KEY))
    );
    assert!(!format!("{events:?}").contains(KEY));
}

/// A provider that refuses the key: the failure is named `authentication_required`, settled
/// `refusal` without a retry, and the last error line says what to fix.
async fn a_refused_key_settles_authentication_required(kind: HarnessKind) {
    let test = format!("{}_refused_key", kind.as_str());
    let Some(clis) = clis(&test, kind) else {
        return;
    };
    // Copilot retries a refused request a few times by itself before it reports it.
    let mut writer = Conversation::new("writer")
        .on_api(api(kind))
        .matching("graph node `writer`");
    for _ in 0..8 {
        writer = writer.turn(Turn::http_error(401, "invalid api key"));
    }
    let lab = Lab::start(kind, clis, Script::new(vec![writer])).await;
    let (result, events) = lab.run(lab.request("writer", step_contract())).await;
    assert_eq!(
        result.outcome,
        WorkerOutcome::Error {
            code: trellis_graph::WorkerErrorCode::Refusal,
            reason: trellis_graph::FailureReason::AuthenticationRequired
        },
        "{events:#?}"
    );
    assert!(
        lab.server.refused().is_empty(),
        "{:#?}",
        lab.server.refused()
    );
    // The CLI may retry on its own; Trellis does not run the turn again.
    assert!(!lab.server.requests_for("writer").is_empty());
    assert!(!events.iter().any(|e| matches!(
        e,
        HarnessEvent::Log { message, .. } if message.contains("retrying once")
    )));
    assert!(events.iter().any(|e| matches!(
        e,
        HarnessEvent::Log { stream: LogStream::Error, message, .. }
            if message.contains("the gateway refused the key")
    )));
}

#[tokio::test]
async fn copilot_refused_key_settles_authentication_required() {
    a_refused_key_settles_authentication_required(HarnessKind::Copilot).await;
}

#[tokio::test]
async fn pi_refused_key_settles_authentication_required() {
    a_refused_key_settles_authentication_required(HarnessKind::Pi).await;
}

/// Copilot on its `github` lane with the reference's single-provider fields declared
/// (`COPILOT_PROVIDER_BASE_URL`, `_API_KEY`, `_WIRE_API`): the session goes to that endpoint with
/// that key, and no GitHub login is needed.
#[tokio::test]
async fn copilot_declared_provider_fields_route_the_session() {
    let kind = HarnessKind::Copilot;
    let Some(clis) = clis("copilot_provider_fields", kind) else {
        return;
    };
    let script = Script::new(vec![
        Conversation::new("writer")
            .on_api(Api::Openai)
            .matching("graph node `writer`")
            .turn(Turn::reply(vec![envelope(
                kind,
                json!({"count": 2, "note": null}),
            )])),
    ]);
    let lab = Lab::start(kind, clis, script).await;
    let harness = AgentHarness::new(
        AgentLane::new(kind, Provider::Github).unwrap(),
        AgentOptions {
            program: None,
            session_root: Some(lab.root.path().join("sessions")),
            sandbox: None,
        },
    );
    let mut request = lab.request("writer", step_contract());
    let Binding::Agent(binding) = &mut request.binding else {
        unreachable!()
    };
    let fields = [
        "COPILOT_PROVIDER_BASE_URL",
        "COPILOT_PROVIDER_API_KEY",
        "COPILOT_PROVIDER_WIRE_API",
    ];
    binding.connections = BTreeMap::from([(
        "copilot_provider".to_owned(),
        fields.map(str::to_owned).to_vec(),
    )]);
    request.environment = SecretEnv::new(BTreeMap::from([
        (fields[0].to_owned(), lab.server.openai_base_url()),
        (fields[1].to_owned(), KEY.to_owned()),
        (fields[2].to_owned(), "responses".to_owned()),
    ]));
    let (tx, mut rx) = mpsc::channel(8192);
    let result = harness.execute(request, tx, CancellationToken::new()).await;
    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(event);
    }
    assert_eq!(
        result.outcome,
        WorkerOutcome::Verified {
            output: json!({"count": 2}),
            artifacts: vec![]
        },
        "{events:#?}"
    );
    lab.assert_script_done(&events);
    let requests = lab.server.requests_for("writer");
    assert_eq!(
        requests[0].headers.get("authorization").map(String::as_str),
        Some(format!("Bearer {KEY}").as_str())
    );
    let logged = format!("{events:?}");
    assert!(!logged.contains(KEY));
    assert!(!logged.contains("were not passed"), "{logged}");
}
