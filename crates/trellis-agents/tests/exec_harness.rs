//! The exec harness against small shell workers: every outcome mapping, deadlines, idle limits,
//! cancellation of the whole process group, and environment hygiene.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use trellis_agents::{
    Binding, CommandBinding, ExecHarness, ExecutionRequest, Harness, HarnessEvent, LogStream,
    NodeContract, SecretEnv,
};
use trellis_graph::{NodeName, PayloadType, WorkerErrorCode, WorkerOutcome};

fn write_script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_string_lossy().into_owned()
}

fn request(dir: &Path, script: String, output: PayloadType) -> ExecutionRequest {
    ExecutionRequest {
        run_id: "run-1".into(),
        node: NodeName::new("work").unwrap(),
        execution: 1,
        node_instance: 1,
        attempt: 1,
        input: json!({"n": 2}),
        instructions: None,
        contract: NodeContract {
            output,
            verifier: None,
        },
        binding: Binding::Command(CommandBinding {
            command: vec![script],
            cwd: None,
            env: BTreeMap::from([("MODE".into(), "test".into())]),
            connections: vec!["API_TOKEN".into()],
            idle_timeout_ms: None,
        }),
        workspace: dir.to_path_buf(),
        scratch: dir.join("scratch"),
        deadline: Some(Duration::from_secs(20)),
        idle_timeout: None,
        environment: SecretEnv::new(BTreeMap::from([
            ("API_TOKEN".into(), "canary-secret-4242".into()),
            ("UNDECLARED".into(), "should-not-pass".into()),
        ])),
        base_env: vec![
            ("PATH".into(), std::env::var("PATH").unwrap()),
            ("HOME".into(), "/nonexistent-home".into()),
            ("SHELL".into(), "/bin/sh".into()),
        ],
    }
}

async fn run(req: ExecutionRequest) -> (WorkerOutcome, Vec<HarnessEvent>) {
    let (tx, mut rx) = mpsc::channel(1024);
    let result = ExecHarness::new()
        .execute(req, tx, CancellationToken::new())
        .await;
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }
    (result.outcome, events)
}

fn logs(events: &[HarnessEvent]) -> Vec<(LogStream, String)> {
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

fn code(outcome: &WorkerOutcome) -> Option<WorkerErrorCode> {
    outcome.error_code()
}

#[tokio::test]
async fn a_valid_reply_succeeds_and_sees_only_declared_environment() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        "ok.sh",
        r#"input=$(cat)
echo "env: MODE=$MODE TOKEN=$API_TOKEN UNDECLARED=${UNDECLARED:-unset} SHELL=${SHELL:-unset} RUN=$TRELLIS_RUN_ID NODE=$TRELLIS_NODE" >&2
echo "stdin: $input" >&2
echo '{"output": 4}'"#,
    );
    let (outcome, events) = run(request(dir.path(), script, PayloadType::Integer)).await;
    assert_eq!(
        outcome,
        WorkerOutcome::Verified {
            output: json!(4),
            artifacts: vec![]
        }
    );
    let lines = logs(&events);
    let env_line = &lines.iter().find(|(_, m)| m.starts_with("env:")).unwrap().1;
    assert_eq!(
        env_line,
        "env: MODE=test TOKEN=[REDACTED] UNDECLARED=unset SHELL=unset RUN=run-1 NODE=work"
    );
    let stdin_line = &lines
        .iter()
        .find(|(_, m)| m.starts_with("stdin:"))
        .unwrap()
        .1;
    assert!(stdin_line.contains(r#""input":{"n":2}"#), "{stdin_line}");
    assert!(!format!("{events:?}").contains("canary-secret-4242"));
}

#[tokio::test]
async fn replies_are_checked_against_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let wrong_type = write_script(dir.path(), "w.sh", r#"echo '{"output": "four"}'"#);
    let (outcome, events) = run(request(dir.path(), wrong_type, PayloadType::Integer)).await;
    assert_eq!(code(&outcome), Some(WorkerErrorCode::Malformed));
    assert!(
        logs(&events)
            .iter()
            .any(|(s, m)| *s == LogStream::System && m.contains("must be a integer"))
    );
    let not_json = write_script(dir.path(), "n.sh", "echo hello");
    let (outcome, _) = run(request(dir.path(), not_json, PayloadType::Integer)).await;
    assert_eq!(code(&outcome), Some(WorkerErrorCode::Malformed));
}

#[tokio::test]
async fn exit_codes_map_to_crash_and_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let crash = write_script(dir.path(), "c.sh", "exit 3");
    assert_eq!(
        code(&run(request(dir.path(), crash, PayloadType::Null)).await.0),
        Some(WorkerErrorCode::Crash)
    );
    let refuse = write_script(dir.path(), "r.sh", "exit 75");
    assert_eq!(
        code(&run(request(dir.path(), refuse, PayloadType::Null)).await.0),
        Some(WorkerErrorCode::Refusal)
    );
    let mut missing = request(dir.path(), "/no/such/program".into(), PayloadType::Null);
    missing.deadline = None;
    assert_eq!(code(&run(missing).await.0), Some(WorkerErrorCode::Crash));
}

#[tokio::test]
async fn deadline_and_idle_limits_settle_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let sleeper = write_script(dir.path(), "s.sh", "sleep 30");
    let mut req = request(dir.path(), sleeper.clone(), PayloadType::Null);
    req.deadline = Some(Duration::from_millis(300));
    assert_eq!(code(&run(req).await.0), Some(WorkerErrorCode::Timeout));

    let mut req = request(dir.path(), sleeper, PayloadType::Null);
    req.idle_timeout = Some(Duration::from_millis(400));
    let (outcome, events) = run(req).await;
    assert_eq!(code(&outcome), Some(WorkerErrorCode::Timeout));
    let warnings: Vec<_> = logs(&events)
        .into_iter()
        .filter(|(_, m)| m.starts_with("no output for") && m.ends_with("from node work"))
        .collect();
    assert!(
        warnings.len() >= 2,
        "expected a half-way warning and a final one: {warnings:?}"
    );
}

#[tokio::test]
async fn cancellation_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("grandchild.pid");
    let script = write_script(
        dir.path(),
        "tree.sh",
        &format!("sleep 60 &\necho $! > {}\nwait", marker.display()),
    );
    let req = request(dir.path(), script, PayloadType::Null);
    let cancel = CancellationToken::new();
    let (tx, _rx) = mpsc::channel(64);
    let canceller = cancel.clone();
    let marker_wait = marker.clone();
    tokio::spawn(async move {
        for _ in 0..200 {
            let written = std::fs::read_to_string(&marker_wait).unwrap_or_default();
            if written.ends_with('\n') {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        canceller.cancel();
    });
    let result = ExecHarness::new().execute(req, tx, cancel).await;
    assert_eq!(code(&result.outcome), Some(WorkerErrorCode::Refusal));
    let pid: i32 = std::fs::read_to_string(&marker)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The grandchild is gone (or a zombie reaped by init shortly after).
    let mut alive = true;
    for _ in 0..100 {
        alive = unsafe { libc::kill(pid, 0) } == 0
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z "));
        if !alive {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!alive, "grandchild {pid} survived cancellation");
}

#[tokio::test]
async fn a_background_child_holding_stdout_does_not_hang_the_harness() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), "bg.sh", "sleep 60 &\necho '{\"output\": null}'");
    let (outcome, _) = tokio::time::timeout(
        Duration::from_secs(10),
        run(request(dir.path(), script, PayloadType::Null)),
    )
    .await
    .expect("harness returned");
    assert!(matches!(outcome, WorkerOutcome::Verified { .. }));
}
