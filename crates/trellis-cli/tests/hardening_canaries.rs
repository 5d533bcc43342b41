//! Hardening: canary secrets of several shapes — multiline, unicode, JSON-special, regex-special,
//! long, and one straddling the 4 KiB line cut — handed to a worker that prints them. No byte of
//! any of them (nor a line or an edge of one) may reach the state directory or any observer:
//! `run`, `status`, `watch`, `logs`, `list`, and the HTTP API of `trellis serve`.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Child;

use serde_json::{Value, json};
use support::graph::*;
use support::{COMMAND_TIMEOUT, Sandbox, finish, uniform_worker_plan};

/// The bearer token of the served API (itself a canary: it must not be printed either).
const TOKEN: &str = "trellis_hardening_token_0f1e2d3c4b5a";

/// `(variable, value)`: the worker prints each as `value: VALUE :end`, and the first (sorted by
/// name) again after 4,066 bytes of padding, so the 4,096-byte cut falls inside it.
fn canaries() -> Vec<(String, String)> {
    vec![
        (
            "CANARY_0_EDGE".into(),
            "edge-canary-7f3a9c2e41d8b6a0-straddling-the-cut".into(),
        ),
        (
            "CANARY_1_MULTILINE".into(),
            "multi-canary-first-line\nmulti-canary-second-line\r\nmulti-canary-third".into(),
        ),
        (
            "CANARY_2_UNICODE".into(),
            "ünï-canary-çødé-✓-日本語-straße-🔑".into(),
        ),
        (
            "CANARY_3_JSON".into(),
            "json-canary\"\\/{}[]:,\t\u{8}end".into(),
        ),
        (
            "CANARY_4_REGEX".into(),
            "regex-canary.*+?()[]{}|^$\\d".into(),
        ),
        (
            "CANARY_5_LONG".into(),
            format!("long-canary-{}", "k9".repeat(600)),
        ),
    ]
}

/// Pieces of a value that must not appear either: the value, each of its lines, and its first
/// and last 16 characters (a cut or a half-masked value leaves an edge) — each as it is, as
/// JSON would escape it (the ledger and every JSON answer hold escaped text), and in the
/// shapes the worker printed it in: JSON with non-ASCII as `\uXXXX` (Python's `json.dumps`),
/// and Python's `repr`.
fn pieces(value: &str) -> Vec<Vec<u8>> {
    let chars: Vec<char> = value.chars().collect();
    let mut texts: Vec<String> = vec![value.to_owned()];
    texts.extend(
        value
            .lines()
            .filter(|line| line.len() >= 12)
            .map(str::to_owned),
    );
    texts.push(chars[..16].iter().collect());
    texts.push(chars[chars.len() - 16..].iter().collect());
    let mut pieces = Vec::new();
    for text in texts {
        let escaped = serde_json::to_string(&text).expect("json");
        let escaped = escaped[1..escaped.len() - 1].to_owned();
        for shape in [escaped, json_ascii(&text), python_repr(&text)] {
            if shape != text && !pieces.contains(&shape.as_bytes().to_vec()) {
                pieces.push(shape.into_bytes());
            }
        }
        pieces.push(text.into_bytes());
    }
    pieces
}

/// A JSON string body with every non-ASCII character as `\uXXXX` (UTF-16), as Python's
/// `json.dumps` writes it by default.
fn json_ascii(text: &str) -> String {
    let escaped = serde_json::to_string(text).expect("json");
    let mut out = String::new();
    for c in escaped[1..escaped.len() - 1].chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// The body of Python's `repr` of a str (quotes left out): backslash, quote and the control
/// characters escaped.
fn python_repr(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

fn leak_graph() -> Value {
    let state = record(&[("value", integer(), true)]);
    graph(
        state.clone(),
        seq(
            "root",
            &state,
            vec![
                step("leakWork", null(), null(), &[], &[]),
                unless_failed("leakWork", &state, succeed("done", null(), &[])),
            ],
            &[],
        ),
    )
}

/// One `trellis serve` on loopback over the sandbox's home.
struct Server {
    child: Child,
    address: String,
}

impl Server {
    /// Serves the sandbox's ledger, or `ledger` when given.
    fn start(sandbox: &Sandbox, ledger: Option<&str>) -> Self {
        let workspaces = sandbox.home.with_file_name("served");
        let mut args = vec![
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--token-env",
            "TEAM_TOKEN",
            "--workspaces",
            workspaces.to_str().expect("UTF-8"),
            // The python test worker lies outside the workspace a sandbox shows.
            "--isolation",
            "none",
        ];
        if let Some(ledger) = ledger {
            args.extend(["--ledger", ledger]);
        }
        let mut command = sandbox.command(&args);
        command.env("TEAM_TOKEN", TOKEN);
        let mut child = command.spawn().expect("start trellis serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut first = String::new();
        BufReader::new(stdout)
            .read_line(&mut first)
            .expect("serve says where it listens");
        let listening: Value = serde_json::from_str(&first).expect("a JSON line");
        let address = listening["listening"].as_str().expect("address").to_owned();
        Self { child, address }
    }

    /// The whole answer (headers and body) to `GET path`; event streams of a finished run
    /// end by themselves.
    fn get(&self, path: &str) -> Vec<u8> {
        let mut stream = TcpStream::connect(&self.address).expect("connect");
        stream
            .set_read_timeout(Some(COMMAND_TIMEOUT))
            .expect("timeout");
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Accept: */*\r\nConnection: close\r\n\r\n",
            self.address
        )
        .expect("request");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).expect("answer");
        let head = String::from_utf8_lossy(&answer[..answer.len().min(12)]).into_owned();
        assert!(head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
        answer
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every file under `dir`, as bytes, with its path.
fn files_under(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("dir").filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            files.push((path.display().to_string(), bytes));
        }
    }
    files
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// Panics naming every canary piece (and the API token) found in an observed source.
fn assert_no_leak(canaries: &[(String, String)], observed: &[(String, Vec<u8>)]) {
    let mut leaks = Vec::new();
    for (name, value) in canaries {
        for piece in pieces(value) {
            for (source, bytes) in observed {
                if contains(bytes, &piece) {
                    leaks.push(format!(
                        "{name}: {:?} in {source}",
                        String::from_utf8_lossy(&piece)
                    ));
                }
            }
        }
    }
    for (source, bytes) in observed {
        if contains(bytes, TOKEN.as_bytes()) {
            leaks.push(format!("the API token in {source}"));
        }
    }
    assert!(leaks.is_empty(), "leaked:\n{}", leaks.join("\n"));
}

#[test]
fn canary_secrets_reach_no_byte_of_the_home_and_no_observer() {
    let sandbox = Sandbox::new();
    let canaries = canaries();
    let mut plan = uniform_worker_plan(&[]);
    plan["connections"] = json!(canaries.iter().map(|(name, _)| name).collect::<Vec<_>>());
    let args = sandbox.run_args(&leak_graph(), &json!({"value": 1}), &plan);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = canaries
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let run_output = finish(sandbox.spawn_with_env(&args, &env), COMMAND_TIMEOUT, &args);
    let lines = run_output.ndjson();
    let run = lines[0]["runId"].as_str().expect("receipt").to_owned();
    assert_eq!(
        lines.last().expect("events")["status"]["terminalResult"]["status"],
        "succeeded",
        "{run_output:#?}"
    );

    // The worker really printed them: each masked line is in the log.
    let logs = sandbox.trellis(&["logs", &run]).success();
    let masked = logs
        .ndjson()
        .iter()
        .filter(|line| line["record"]["message"] == "value: [REDACTED] :end")
        .count();
    assert_eq!(masked, canaries.len(), "{}", logs.stdout);
    for shape in [
        "json: {\"k\": \"[REDACTED]\"}",
        "json8: {\"k\": \"[REDACTED]\"}",
        "repr: '[REDACTED]'",
    ] {
        let count = logs
            .ndjson()
            .iter()
            .filter(|line| line["record"]["message"] == shape)
            .count();
        assert_eq!(count, canaries.len(), "{shape}: {}", logs.stdout);
    }

    let mut observed: Vec<(String, Vec<u8>)> = vec![
        ("run stdout".into(), run_output.stdout.clone().into_bytes()),
        ("run stderr".into(), run_output.stderr.clone().into_bytes()),
        ("logs".into(), logs.stdout.into_bytes()),
    ];
    for args in [
        &["status", &run, "--json"][..],
        &["status", &run][..],
        &["watch", &run][..],
        &["list", "--json"][..],
        &["list"][..],
    ] {
        let output = sandbox.trellis(args).success();
        observed.push((args.join(" "), output.stdout.into_bytes()));
    }
    let server = Server::start(&sandbox, None);
    for path in [
        "/api/v1/runs".to_owned(),
        format!("/api/v1/runs/{run}"),
        format!("/api/v1/runs/{run}/graph"),
        format!("/api/v1/runs/{run}/executions/1"),
        format!("/api/v1/runs/{run}/watch"),
        format!("/api/v1/runs/{run}/logs"),
    ] {
        observed.push((format!("GET {path}"), server.get(&path)));
    }
    drop(server);
    observed.extend(files_under(&sandbox.home));

    assert_no_leak(&canaries, &observed);
    eprintln!(
        "{} canaries × {} observed sources (incl. {} files of the home): no leak",
        canaries.len(),
        observed.len(),
        files_under(&sandbox.home).len()
    );
}

/// `pg_dump` of the newest installed PostgreSQL (Debian keeps it outside `PATH`), if any.
fn pg_dump() -> Option<std::path::PathBuf> {
    let mut found: Vec<std::path::PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("bin/pg_dump"))
        .filter(|path| path.exists())
        .collect();
    found.sort();
    found.pop()
}

/// The same canaries on a PostgreSQL ledger, the step run by a worker host (`trellis worker`,
/// whose environment holds the values the plan names): no row of the run's schema (the whole
/// schema, dumped), no file under the home, no CLI observer and no API answer of `trellis
/// serve` holds any piece of them.
#[test]
fn on_postgresql_through_a_worker_host_canaries_reach_no_row_file_or_observer() {
    let Some(schema) = trellis_ledger::testing::postgres::TestSchema::for_test() else {
        return;
    };
    let ledger = schema.location_url();
    let sandbox = Sandbox::new();
    let canaries = canaries();
    let env: Vec<(&str, &str)> = canaries
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let mut worker = sandbox.command(&["worker", "--ledger", &ledger, "--poll-ms", "50"]);
    worker.envs(env.iter().copied());
    let worker = worker.spawn().expect("start trellis worker");
    struct Killed(Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let worker = Killed(worker);

    let mut plan = uniform_worker_plan(&[]);
    plan["connections"] = json!(canaries.iter().map(|(name, _)| name).collect::<Vec<_>>());
    let mut args = sandbox.run_args(&leak_graph(), &json!({"value": 1}), &plan);
    args.extend(["--ledger".to_owned(), ledger.clone()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut run_env = env.clone();
    run_env.push(("TRELLIS_DISPATCH", "queue"));
    let run_output = finish(
        sandbox.spawn_with_env(&args, &run_env),
        COMMAND_TIMEOUT,
        &args,
    );
    let lines = run_output.ndjson();
    let run = lines[0]["runId"].as_str().expect("receipt").to_owned();
    assert_eq!(
        lines.last().expect("events")["status"]["terminalResult"]["status"],
        "succeeded",
        "{run_output:#?}"
    );
    drop(worker);

    let logs = sandbox
        .trellis(&["logs", &run, "--ledger", &ledger])
        .success();
    let masked = logs
        .ndjson()
        .iter()
        .filter(|line| line["record"]["message"] == "value: [REDACTED] :end")
        .count();
    assert_eq!(
        masked,
        canaries.len(),
        "the worker host printed them: {}",
        logs.stdout
    );

    let mut observed: Vec<(String, Vec<u8>)> = vec![
        ("run stdout".into(), run_output.stdout.clone().into_bytes()),
        ("run stderr".into(), run_output.stderr.clone().into_bytes()),
        ("logs".into(), logs.stdout.into_bytes()),
    ];
    for args in [
        &["status", &run, "--json"][..],
        &["watch", &run][..],
        &["list", "--json"][..],
    ] {
        let mut args = args.to_vec();
        args.extend(["--ledger", &ledger]);
        let output = sandbox.trellis(&args).success();
        observed.push((args.join(" "), output.stdout.into_bytes()));
    }
    let server = Server::start(&sandbox, Some(&ledger));
    for path in [
        "/api/v1/runs".to_owned(),
        format!("/api/v1/runs/{run}"),
        format!("/api/v1/runs/{run}/executions/1"),
        format!("/api/v1/runs/{run}/watch"),
        format!("/api/v1/runs/{run}/logs"),
    ] {
        observed.push((format!("GET {path}"), server.get(&path)));
    }
    drop(server);
    observed.extend(files_under(&sandbox.home));
    let dump =
        pg_dump().expect("pg_dump beside the PostgreSQL server scripts/postgres.sh installs");
    let dumped = std::process::Command::new(dump)
        .args(["--data-only", "--schema", schema.name(), schema.url()])
        .output()
        .expect("run pg_dump");
    assert!(dumped.status.success(), "{dumped:?}");
    assert!(
        contains(&dumped.stdout, b"REDACTED"),
        "the dump holds the run's masked lines"
    );
    observed.push(("the ledger's schema, dumped".into(), dumped.stdout));
    assert_no_leak(&canaries, &observed);
}
