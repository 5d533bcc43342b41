//! A worker host that shares no filesystem with the serving host: `trellis worker --server`
//! runs as another Unix user (`trellisworker`, created here; the tests need root) that cannot
//! read the server's state or workspaces (0700), on the private PostgreSQL ledger. It fetches
//! each execution's workspace from `trellis serve --dispatch queue` as git objects, runs the
//! offline command workers of a software-change in a private copy and returns the result; the
//! run takes its checkpoints, repairs once, pushes the right file, and leaves no transfer
//! reference behind. Then the same through a relay that cuts the first result upload off
//! mid-body and swallows the answer to the second: the result lands once, nothing is lost or
//! settled twice.

mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use support::serve::{Server, served_workspaces};
use support::{Sandbox, Signal, TRELLIS, send_signal};
use trellis_ledger::{Cursor, EventFilter, RunEvent, RunId, RunStore, StoredEvent};
use trellis_testkit::git::git;

const TOKEN: &str = "trellis_remote_worker_token_5e4d3c2b";
const WORKER_USER: &str = "trellisworker";

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/offline")
}

/// Whether this process may create users and run commands as them.
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// The worker's user, created when missing (a concurrent test may have just made it).
fn ensure_worker_user() {
    let known = |user: &str| {
        Command::new("id")
            .arg(user)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !known(WORKER_USER) {
        let _ = Command::new("useradd")
            .args([
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                WORKER_USER,
            ])
            .status();
    }
    assert!(known(WORKER_USER), "useradd {WORKER_USER} failed");
}

/// Runs `program ARGS` as the worker's user; whether it succeeded.
fn as_worker_user(args: &[&str]) -> bool {
    Command::new("runuser")
        .args(["-u", WORKER_USER, "--"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// A bare `origin.git` beside the sandbox's workspace, and the workspace a clone of it holding
/// the offline workers on `main`, pushed.
fn client_checkout(sandbox: &Sandbox) -> PathBuf {
    let origin = sandbox.workspace.with_file_name("origin.git");
    let origin_text = origin.to_str().expect("UTF-8 path");
    git(&sandbox.workspace, &["init", "-q", "--bare", origin_text]);
    let work = &sandbox.workspace;
    git(work, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(work.join("offline")).expect("offline dir");
    for file in ["worker.py", "review.py", "plan.json"] {
        std::fs::copy(examples().join(file), work.join("offline").join(file)).expect("copy");
    }
    git(work, &["add", "."]);
    git(work, &["commit", "-q", "-m", "init"]);
    git(work, &["remote", "add", "origin", origin_text]);
    git(work, &["push", "-q", "-u", "origin", "main"]);
    origin
}

/// `trellis worker --server BASE` as the worker's user, in a home of its own; stopped with
/// SIGTERM (which `runuser` hands on) when dropped.
struct RemoteWorker {
    child: Option<Child>,
    _home: tempfile::TempDir,
}

impl RemoteWorker {
    fn start(ledger: &str, base: &str) -> Self {
        let home = tempfile::Builder::new()
            .prefix("trellis-remote-worker-")
            .tempdir()
            .expect("worker home");
        let status = Command::new("chown")
            .args([
                &format!("{WORKER_USER}:"),
                home.path().to_str().expect("UTF-8"),
            ])
            .status()
            .expect("chown");
        assert!(status.success());
        let child = Command::new("runuser")
            .args([
                "-u",
                WORKER_USER,
                "--",
                TRELLIS,
                "worker",
                "--ledger",
                ledger,
            ])
            .args([
                "--server",
                base,
                "--token-env",
                "WORKER_TOKEN",
                "--poll-ms",
                "50",
            ])
            .current_dir(home.path())
            .env("HOME", home.path())
            .env("TRELLIS_HOME", home.path().join("state"))
            .env("WORKER_TOKEN", TOKEN)
            .env_remove("TRELLIS_DISPATCH")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the worker as another user");
        Self {
            child: Some(child),
            _home: home,
        }
    }

    /// Stops the worker and answers what it printed.
    fn stop(&mut self) -> String {
        let Some(mut child) = self.child.take() else {
            return String::new();
        };
        send_signal(child.id(), Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let output = child.wait_with_output().expect("worker output");
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    }
}

impl Drop for RemoteWorker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs `trellis ARGS` with the targets file naming `base` as `team`.
fn with_target(sandbox: &Sandbox, base: &str, args: &[&str]) -> support::CliOutput {
    let targets = sandbox.home.with_file_name("targets.json");
    let targets = targets.to_str().expect("UTF-8 path");
    let env = [("TRELLIS_TARGETS", targets), ("TEAM_TOKEN", TOKEN)];
    if !Path::new(targets).exists() {
        sandbox
            .trellis_with_env(
                &["target", "add", "team", base, "--token-env", "TEAM_TOKEN"],
                &env,
            )
            .success();
    }
    let mut all = vec!["--target", "team"];
    all.extend(args);
    sandbox.trellis_with_env(&all, &env)
}

fn every_event(store: &dyn RunStore, run: &RunId) -> Vec<StoredEvent> {
    let mut events = Vec::new();
    let mut after = Cursor::START;
    loop {
        let page = store
            .events_after(run, after, 1000, EventFilter::default())
            .expect("events");
        let Some(last) = page.last() else {
            return events;
        };
        after = last.cursor;
        events.extend(page);
    }
}

/// What the run recorded that these tests judge.
#[derive(Debug, Default)]
struct Recorded {
    checkpoints: usize,
    worker_rounds: usize,
    settled: BTreeMap<u64, usize>,
    applied: usize,
    ran_on_worker_host: usize,
    text: String,
}

fn recorded(store: &dyn RunStore, run: &RunId) -> Recorded {
    let mut seen = Recorded::default();
    for stored in every_event(store, run) {
        match &stored.event {
            RunEvent::CheckpointTaken { .. } => seen.checkpoints += 1,
            RunEvent::NodeStarted { node, .. } if node.as_str() == "worker" => {
                seen.worker_rounds += 1;
            }
            RunEvent::NodeCompleted { execution, .. } => {
                *seen.settled.entry(*execution).or_default() += 1;
            }
            RunEvent::Log { message, .. } => {
                if message.starts_with("applied the worker host's result") {
                    seen.applied += 1;
                }
                if message.starts_with("ran on worker@") {
                    seen.ran_on_worker_host += 1;
                }
            }
            _ => {}
        }
        seen.text
            .push_str(&serde_json::to_string(&stored.event).expect("event JSON"));
    }
    seen
}

/// Runs the software-change through a worker host of another user reaching the server at
/// `worker_base` (the server itself, or a relay in front of it); answers what the run recorded.
fn software_change_on_a_worker_of_another_user(relay: Option<&Relay>) -> Option<Recorded> {
    if !is_root() {
        eprintln!("skipped: creating the worker's user needs root");
        return None;
    }
    let schema = trellis_ledger::testing::postgres::TestSchema::for_test()?;
    ensure_worker_user();
    let ledger = schema.location_url();
    let sandbox = Sandbox::new();
    let origin = client_checkout(&sandbox);
    let server = Server::start(
        &sandbox,
        TOKEN,
        Some(&ledger),
        &["--dispatch", "queue"],
        &[],
    );
    let served = served_workspaces(&sandbox);
    for private in [&sandbox.home, &served] {
        std::fs::create_dir_all(private).expect("server directory");
        let status = Command::new("chmod")
            .args(["0700", private.to_str().expect("UTF-8")])
            .status()
            .expect("chmod");
        assert!(status.success());
        // The set-up is what it claims: the worker's user cannot look inside.
        assert!(
            !as_worker_user(&["ls", private.to_str().expect("UTF-8")]),
            "{WORKER_USER} can read {}",
            private.display()
        );
    }
    let worker_base = relay.map_or_else(|| server.base.clone(), |relay| relay.start(&server.base));
    let mut worker = RemoteWorker::start(&ledger, &worker_base);

    let out = with_target(
        &sandbox,
        &server.base,
        &[
            "run",
            "--template",
            "software-change",
            "--push",
            "--task",
            "Write a friendly greeting to greeting.txt",
            "--runtime-config",
            "offline/plan.json",
        ],
    );
    let printed = worker.stop();
    let lines = out.success().ndjson();
    let run = lines[0]["runId"].as_str().expect("receipt").to_owned();
    let last = lines.last().expect("updates");
    assert_eq!(
        last["status"]["terminalResult"]["status"], "succeeded",
        "{last:#}\nworker host:\n{printed}"
    );
    assert!(printed.contains("\"workspaces\":\"fetched\""), "{printed}");
    assert!(!printed.contains(TOKEN), "the worker printed its token");

    // The worker's first greeting was rejected; its repair reached the workspace and the
    // pushed branch.
    let branch = last["status"]["terminalResult"]["output"]["headBranch"]
        .as_str()
        .expect("head branch")
        .to_owned();
    assert_eq!(
        git(&origin, &["show", &format!("{branch}:greeting.txt")]),
        "Hello, world!"
    );
    // Nothing of the transfers stays in the server's checkout.
    let checkout = std::fs::read_dir(&served)
        .expect("served workspaces")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.join(".git/trellis-source.json").exists())
        .expect("the run's checkout");
    assert_eq!(
        git(&checkout, &["for-each-ref", "refs/trellis/remote/"]),
        "",
        "transfer references left behind"
    );

    let store = schema.open().expect("the ledger");
    let run_id = RunId::new(&run).expect("run id");
    let seen = recorded(&store, &run_id);
    assert!(!seen.text.contains(TOKEN), "the token reached the ledger");
    drop(server);
    Some(seen)
}

#[test]
fn a_worker_host_of_another_user_completes_a_software_change_with_checkpoints() {
    let Some(seen) = software_change_on_a_worker_of_another_user(None) else {
        return;
    };
    // Two rounds of the writer (rejected, then repaired), each after a checkpoint; every
    // execution ran on the worker host and settled once; both writer rounds changed files.
    assert_eq!(seen.worker_rounds, 2, "{seen:?}");
    assert!(seen.checkpoints >= 2, "{seen:?}");
    assert!(seen.ran_on_worker_host >= 6, "{seen:?}");
    assert_eq!(seen.applied, 2, "{seen:?}");
    assert!(seen.settled.values().all(|n| *n == 1), "{seen:?}");
}

#[test]
fn an_interrupted_result_upload_is_retried_and_lands_once() {
    let relay = Relay::default();
    let Some(seen) = software_change_on_a_worker_of_another_user(Some(&relay)) else {
        return;
    };
    // The first upload was cut off, the second's answer lost; later offers (the same result)
    // were answered with the commit the server kept.
    assert!(relay.result_uploads() >= 4, "{}", relay.result_uploads());
    assert_eq!(seen.worker_rounds, 2, "{seen:?}");
    assert_eq!(seen.applied, 2, "{seen:?}");
    assert!(seen.settled.values().all(|n| *n == 1), "{seen:?}");
}

/// A loopback HTTP relay between the worker host and `trellis serve`, one request per
/// connection (`Connection: close`), that spoils the first two result uploads: the first is
/// cut off halfway through its body, the second is delivered whole but its answer dropped.
#[derive(Default)]
struct Relay {
    uploads: Arc<AtomicUsize>,
}

impl Relay {
    fn result_uploads(&self) -> usize {
        self.uploads.load(Ordering::SeqCst)
    }

    /// Starts relaying to `target` (`http://ADDRESS`); answers the relay's base URL.
    fn start(&self, target: &str) -> String {
        let target = target.trim_start_matches("http://").to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").expect("relay port");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let uploads = self.uploads.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                let (target, uploads) = (target.clone(), uploads.clone());
                std::thread::spawn(move || relay_one(client, &target, &uploads));
            }
        });
        base
    }
}

fn relay_one(mut client: TcpStream, target: &str, uploads: &AtomicUsize) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 65536];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let length = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
    let mut rewritten: Vec<String> = head
        .trim_end()
        .lines()
        .filter(|line| !line.to_ascii_lowercase().starts_with("connection:"))
        .map(str::to_owned)
        .collect();
    rewritten.push("Connection: close".into());
    let mut request = format!("{}\r\n\r\n", rewritten.join("\r\n")).into_bytes();
    let body = &buffer[head_end..head_end + length];
    let upload =
        head.starts_with("PUT ") && head.lines().next().is_some_and(|l| l.contains("/result"));
    let nth = if upload {
        uploads.fetch_add(1, Ordering::SeqCst) + 1
    } else {
        0
    };
    let Ok(mut server) = TcpStream::connect(target) else {
        return;
    };
    if nth == 1 {
        // Half the body, then both connections close.
        request.extend_from_slice(&body[..body.len() / 2]);
        let _ = server.write_all(&request);
        return;
    }
    request.extend_from_slice(body);
    if server.write_all(&request).is_err() {
        return;
    }
    let mut answer = Vec::new();
    let _ = server.read_to_end(&mut answer);
    if nth == 2 {
        // The server took it; its answer never arrives.
        return;
    }
    let _ = client.write_all(&answer);
}
