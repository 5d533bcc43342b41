//! Shared fixtures for the fake-CLI tests: a temp tree with a fake `claude`/`codex`
//! first on PATH, a scripted list of turn modes, and helpers to read what each run received.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use trellis_agents::{
    AgentBinding, AgentHarness, AgentLane, AgentOptions, Binding, Effort, ExecutionRequest,
    ExecutionResult, Harness, HarnessEvent, HarnessKind, LogStream, NodeContract, Provider,
    SecretEnv, SessionScope,
};
use trellis_graph::{GraphNode, JsonPath, NodeName, PayloadType};

/// The CLIs with a prompt-mode fake. Copilot is driven over its headless JSON-RPC protocol
/// and pi only through the real CLIs (`real_clis.rs`).
pub const ALL: [HarnessKind; 2] = [HarnessKind::Claude, HarnessKind::Codex];
pub const GATEWAY_KEY: &str = "canary-gateway-key-7f3a91";
pub const GATEWAY_URL: &str = "http://127.0.0.1:9/v1";

const COMMON: &str = include_str!("../fakes/common.sh");

fn body(kind: HarnessKind) -> &'static str {
    match kind {
        HarnessKind::Claude => include_str!("../fakes/claude.sh"),
        HarnessKind::Codex => include_str!("../fakes/codex.sh"),
        HarnessKind::Copilot | HarnessKind::Pi => {
            panic!("no prompt-mode fake for {kind:?}: see real_clis.rs")
        }
    }
}

/// A fake CLI installed in its own temp tree.
pub struct Fake {
    pub kind: HarnessKind,
    pub root: TempDir,
}

impl Fake {
    pub fn new(kind: HarnessKind) -> Fake {
        let root = tempfile::tempdir().unwrap();
        for dir in ["bin", "state", "ws", "home", "sessions"] {
            std::fs::create_dir_all(root.path().join(dir)).unwrap();
        }
        let state = root.path().join("state");
        let script = format!(
            "#!/bin/sh\nSTATE='{}'\n{COMMON}\n{}",
            state.display(),
            body(kind)
        );
        let program = root.path().join("bin").join(kind.as_str());
        std::fs::write(&program, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        let fake = Fake { kind, root };
        fake.reply(&fake.good_reply());
        fake
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// One mode per invocation: reply, text, bad, refuse, fail, crash, hang, silent, exit3, echoenv.
    pub fn turns(&self, modes: &[&str]) {
        std::fs::write(self.path("state/turns"), modes.join("\n") + "\n").unwrap();
    }

    pub fn reply(&self, json: &str) {
        std::fs::write(self.path("state/reply"), json).unwrap();
    }

    /// The envelope a well-behaved agent sends for the default worker contract, in the CLI's
    /// schema dialect.
    pub fn good_reply(&self) -> String {
        match self.kind {
            HarnessKind::Claude => r#"{"response":{"count":3}}"#.into(),
            _ => r#"{"response":{"count":3,"note":null},"refusal":null}"#.into(),
        }
    }

    pub fn invocations(&self) -> u32 {
        std::fs::read_to_string(self.path("state/count"))
            .map(|s| s.trim().parse().unwrap())
            .unwrap_or(0)
    }

    pub fn argv(&self, n: u32) -> Vec<String> {
        self.state_file(&format!("argv.{n}"))
            .lines()
            .map(str::to_owned)
            .collect()
    }

    pub fn stdin(&self, n: u32) -> String {
        self.state_file(&format!("stdin.{n}"))
    }

    /// The child environment of invocation `n`, by name.
    pub fn env(&self, n: u32) -> BTreeMap<String, String> {
        self.state_file(&format!("env.{n}"))
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    pub fn state_file(&self, name: &str) -> String {
        std::fs::read_to_string(self.path("state").join(name)).unwrap_or_default()
    }

    pub fn harness(&self) -> AgentHarness {
        self.harness_on(Provider::Gateway)
    }

    pub fn harness_on(&self, provider: Provider) -> AgentHarness {
        AgentHarness::new(
            AgentLane::new(self.kind, provider).unwrap(),
            AgentOptions {
                program: None,
                session_root: Some(self.path("sessions")),
                sandbox: None,
            },
        )
    }

    /// A worker execution of node `code` on the gateway lane.
    pub fn request(&self, execution: u64) -> ExecutionRequest {
        ExecutionRequest {
            run_id: "run-1".into(),
            node: NodeName::new("code").unwrap(),
            execution,
            node_instance: 1,
            attempt: 1,
            input: json!({"task": "count the files"}),
            instructions: Some("Count the files in the workspace.".into()),
            contract: NodeContract {
                output: count_record(),
                verifier: None,
            },
            binding: Binding::Agent(AgentBinding {
                model: "test-model".into(),
                effort: Some(Effort::High),
                session_scope: SessionScope::Execution,
                connections: BTreeMap::from([(
                    "gateway".to_owned(),
                    vec!["GATEWAY_BASE_URL".to_owned(), "GATEWAY_API_KEY".to_owned()],
                )]),
                idle_timeout_ms: None,
                lane: None,
            }),
            workspace: self.path("ws"),
            scratch: self.path(&format!("scratch-{execution}")),
            deadline: Some(Duration::from_secs(20)),
            idle_timeout: None,
            environment: SecretEnv::new(BTreeMap::from([
                ("GATEWAY_BASE_URL".to_owned(), GATEWAY_URL.to_owned()),
                ("GATEWAY_API_KEY".to_owned(), GATEWAY_KEY.to_owned()),
                (
                    "UNDECLARED_SECRET".to_owned(),
                    "undeclared-value-55".to_owned(),
                ),
            ])),
            base_env: vec![
                (
                    "PATH".into(),
                    format!("{}:/usr/bin:/bin", self.path("bin").display()),
                ),
                ("HOME".into(), self.path("home").display().to_string()),
                ("SHELL".into(), "/bin/sh".into()),
            ],
        }
    }
}

/// `{count: integer, note?: string}`.
pub fn count_record() -> PayloadType {
    PayloadType::parse(
        &json!({"kind": "record", "fields": {
            "count": {"type": {"kind": "integer"}, "required": true},
            "note": {"type": {"kind": "string"}, "required": false}
        }}),
        &JsonPath::root(),
    )
    .unwrap()
}

/// A verifier contract: boolean output, `verdict` signal, string diagnostic.
pub fn verifier_contract() -> NodeContract {
    let node = GraphNode::parse(
        &json!({"kind":"verifier","name":"review","worker":"w@1","input":{"kind":"null"},
            "output":{"kind":"boolean"},"inputBindings":[],"writeBindings":[],"attempts":1,
            "signals":{"verdict":["accepted","rejected"]},"diagnostic":{"kind":"string"}}),
        &JsonPath::root(),
    )
    .unwrap();
    NodeContract::of(&node).unwrap()
}

pub fn set_binding(request: &mut ExecutionRequest, edit: impl FnOnce(&mut AgentBinding)) {
    if let Binding::Agent(binding) = &mut request.binding {
        edit(binding);
    }
}

/// Runs one execution and collects every event it sent.
pub async fn run(
    harness: &dyn Harness,
    request: ExecutionRequest,
) -> (ExecutionResult, Vec<HarnessEvent>) {
    run_with(harness, request, CancellationToken::new()).await
}

pub async fn run_with(
    harness: &dyn Harness,
    request: ExecutionRequest,
    cancel: CancellationToken,
) -> (ExecutionResult, Vec<HarnessEvent>) {
    let (tx, mut rx) = mpsc::channel(4096);
    let result = harness.execute(request, tx, cancel).await;
    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(event);
    }
    (result, events)
}

pub fn logs(events: &[HarnessEvent]) -> Vec<(LogStream, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            HarnessEvent::Log {
                stream, message, ..
            } => Some((*stream, message.clone())),
            _ => None,
        })
        .collect()
}

pub fn has_log(events: &[HarnessEvent], stream: LogStream, needle: &str) -> bool {
    logs(events)
        .iter()
        .any(|(s, m)| *s == stream && m.contains(needle))
}

/// Every file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

pub fn value_of(json: &str) -> Value {
    serde_json::from_str(json).unwrap()
}
