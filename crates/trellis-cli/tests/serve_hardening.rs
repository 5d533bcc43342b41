//! `trellis serve` against clients that are slow or hostile, on loopback: 2,000 idle and
//! half-sent connections do not keep an authenticated client from an answer within 2 s, nor the
//! server's descriptors past its cap (also under `ulimit -n 256`); HTTPS with a certificate made
//! for the test; plain http beyond loopback refused without `--insecure`; problem answers for a
//! bad query string and a control character in a submission key, and no workspace directory
//! left by a refused submission.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::Sandbox;
use support::serve::{Server, TOKEN_ENV, served_workspaces};

const TOKEN: &str = "trellis_hardening_token_0f1e2d3c4b5a6978";

/// How many slow connections the test opens: 2,000, or what the open-file limit leaves room
/// for (the limit is raised to its hard limit first; the count is printed).
fn slow_connection_count() -> usize {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 2_000;
    };
    let soft = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    let room = usize::try_from(soft.saturating_sub(256)).unwrap_or(usize::MAX);
    2_000.min(room)
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        // A fresh connection per request: each one must get past the slow ones.
        .pool_max_idle_per_host(0)
        .build()
        .expect("client")
}

/// Descriptors the process `pid` holds open (Linux), if readable.
fn open_descriptors(pid: u32) -> Option<usize> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()
        .map(Iterator::count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_neither_starve_authenticated_requests_nor_exhaust_descriptors() {
    let count = slow_connection_count();
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, TOKEN, None, &[], &[]);
    let address = server.base.trim_start_matches("http://").to_owned();
    let client = client();
    let runs = format!("{}/api/v1/runs", server.base);
    // Half the connections say nothing; half send most of a request head and stop. While
    // they are being opened, an authenticated client asks every 100 ms (figures printed).
    let opened = Instant::now();
    let opener = tokio::task::spawn_blocking(move || {
        let mut slow = Vec::with_capacity(count);
        for index in 0..count {
            let Ok(mut stream) = TcpStream::connect(&address) else {
                continue;
            };
            if index % 2 == 1 {
                let _ = stream.write_all(b"GET /api/v1/runs HTTP/1.1\r\nHost: x\r\nX-Slow: ");
            }
            slow.push(stream);
        }
        slow
    });
    let mut during = Vec::new();
    while !opener.is_finished() {
        let started = Instant::now();
        let answer = client.get(&runs).bearer_auth(TOKEN).send().await;
        let ok = answer.is_ok_and(|answer| answer.status().as_u16() == 200);
        during.push(started.elapsed());
        assert!(ok, "an authenticated request failed during the flood");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let slow = opener.await.expect("opener");
    during.sort();
    eprintln!(
        "opened {} of {count} slow connections in {:?}; {} authenticated requests meanwhile: \
         median {:?}, worst {:?}",
        slow.len(),
        opened.elapsed(),
        during.len(),
        during.get(during.len() / 2).copied().unwrap_or_default(),
        during.last().copied().unwrap_or_default(),
    );
    assert!(
        slow.len() >= count * 9 / 10,
        "could not open the connections"
    );

    let mut latencies = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        let answer = client
            .get(&runs)
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("an authenticated request is answered");
        let status = answer.status().as_u16();
        let body = answer.text().await.expect("body");
        latencies.push(started.elapsed());
        assert_eq!(status, 200, "{body}");
    }
    let worst = latencies.iter().max().copied().unwrap_or_default();
    let mut sorted = latencies.clone();
    sorted.sort();
    eprintln!(
        "20 authenticated requests beside {} slow connections: median {:?}, worst {:?}",
        slow.len(),
        sorted[sorted.len() / 2],
        worst
    );
    assert!(worst < Duration::from_secs(2), "{latencies:?}");

    // The server holds no more than its cap (1,024 by default) plus its own few files.
    if let Some(held) = open_descriptors(server.pid()) {
        eprintln!("the server holds {held} descriptors");
        assert!(held <= 1_024 + 128, "{held} descriptors open");
    }
    // An unauthenticated request is answered 401 and its connection closed.
    let refused = client.get(&runs).send().await.expect("answered");
    assert_eq!(refused.status().as_u16(), 401);
    assert_eq!(
        refused
            .headers()
            .get("connection")
            .and_then(|v| v.to_str().ok()),
        Some("close")
    );
    drop(slow);
    let _ = server.kill();
}

/// A `trellis serve` started under `ulimit -n 256` (soft and hard), killed when dropped.
struct Limited {
    child: Child,
    base: String,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Drop for Limited {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_with_few_descriptors(sandbox: &Sandbox) -> Limited {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -n 256 && exec "$0" "$@""#)
        .arg(support::TRELLIS)
        .args(["serve", "--listen", "127.0.0.1:0", "--token-env", TOKEN_ENV])
        .args(["--isolation", "none"])
        .env("TRELLIS_HOME", &sandbox.home)
        .env(TOKEN_ENV, TOKEN)
        .env_remove("TRELLIS_LEDGER")
        .env_remove("TRELLIS_DISPATCH")
        .current_dir(&sandbox.workspace)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start trellis serve under ulimit");
    let stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let first = BufReader::new(stdout)
        .lines()
        .next()
        .and_then(Result::ok)
        .expect("trellis serve says where it listens");
    let listening: Value = serde_json::from_str(&first).expect("a JSON line");
    let address = listening["listening"].as_str().expect("address").to_owned();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    Limited {
        child,
        base: format!("http://{address}"),
        stderr: Some(stderr),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_256_descriptors_the_cap_is_lowered_and_the_api_still_answers() {
    let sandbox = Sandbox::new();
    let mut server = start_with_few_descriptors(&sandbox);
    let address = server.base.trim_start_matches("http://").to_owned();
    let count = slow_connection_count();
    let slow = tokio::task::spawn_blocking(move || {
        (0..count)
            .filter_map(|_| TcpStream::connect(&address).ok())
            .collect::<Vec<_>>()
    })
    .await
    .expect("opener");
    let client = client();
    let mut worst = Duration::ZERO;
    for _ in 0..20 {
        let started = Instant::now();
        let answer = client
            .get(format!("{}/api/v1/runs", server.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("an authenticated request is answered");
        assert_eq!(answer.status().as_u16(), 200);
        worst = worst.max(started.elapsed());
    }
    let held = open_descriptors(server.child.id());
    eprintln!(
        "under ulimit -n 256, beside {} idle connections: worst of 20 authenticated requests \
         {worst:?}; the server holds {held:?} descriptors",
        slow.len()
    );
    assert!(worst < Duration::from_secs(2), "{worst:?}");
    assert!(held.is_none_or(|held| held < 256), "{held:?}");
    drop(slow);
    let _ = server.child.kill();
    let _ = server.child.wait();
    let stderr = server
        .stderr
        .take()
        .map(|reader| reader.join().unwrap_or_default())
        .unwrap_or_default();
    assert!(
        stderr.contains("--max-connections 1024 lowered to 128"),
        "{stderr}"
    );
}

#[tokio::test]
async fn half_sent_requests_are_closed_after_the_header_timeout() {
    let sandbox = Sandbox::new();
    let server = Server::start(
        &sandbox,
        TOKEN,
        None,
        &["--header-timeout", "1", "--body-timeout", "1"],
        &[],
    );
    let address = server.base.trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&address).expect("connect");
    stream
        .write_all(b"GET /api/v1/runs HTTP/1.1\r\nHost: x\r\n")
        .expect("write");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let started = Instant::now();
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    let closed_after = started.elapsed();
    eprintln!("a half-sent request head was closed after {closed_after:?}");
    assert!(closed_after < Duration::from_secs(5), "{closed_after:?}");

    // An authenticated request whose body never comes: 408, as a problem.
    let mut stream = TcpStream::connect(&address).expect("connect");
    let head = format!(
        "POST /api/v1/validate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    );
    stream.write_all(head.as_bytes()).expect("write");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.contains(r#""code":"request.body_timeout""#),
        "{answer}"
    );
    let _ = server.kill();
}

#[test]
fn plain_http_beyond_loopback_is_refused_without_insecure() {
    let sandbox = Sandbox::new();
    for listen in ["0.0.0.0:0", "192.0.2.1:8420", "[::]:0"] {
        let refused = sandbox.trellis_with_env(
            &["serve", "--listen", listen, "--token-env", TOKEN_ENV],
            &[(TOKEN_ENV, TOKEN)],
        );
        assert_ne!(refused.code, Some(0), "{refused:#?}");
        for hint in ["plain http", "--tls-cert", "--insecure", "127.0.0.1"] {
            assert!(refused.stderr.contains(hint), "{hint}: {}", refused.stderr);
        }
    }
    // A certificate that is not PEM is refused at startup, naming the file.
    let bogus = sandbox.workspace.join("bogus.pem");
    std::fs::write(&bogus, "not a certificate\n").expect("write");
    let bogus = bogus.to_str().expect("UTF-8 path");
    let refused = sandbox.trellis_with_env(
        &["serve", "--listen", "127.0.0.1:0", "--token-env", TOKEN_ENV]
            .into_iter()
            .chain(["--tls-cert", bogus, "--tls-key", bogus])
            .collect::<Vec<_>>(),
        &[(TOKEN_ENV, TOKEN)],
    );
    assert_ne!(refused.code, Some(0), "{refused:#?}");
    assert!(refused.stderr.contains("bogus.pem"), "{}", refused.stderr);
    let help = sandbox.trellis(&["serve", "--help"]).success();
    for flag in [
        "--tls-cert",
        "--tls-key",
        "--insecure",
        "--header-timeout",
        "--body-timeout",
        "--idle-timeout",
        "--max-body",
        "--max-connections",
    ] {
        assert!(help.stdout.contains(flag), "{flag} in --help");
    }
}

/// A self-signed certificate for `trellis.test` and 127.0.0.1 made with the openssl CLI:
/// `(certificate, key)` paths, or `None` (printed) when openssl is missing.
fn self_signed(sandbox: &Sandbox) -> Option<(String, String)> {
    let dir = sandbox.workspace.join("tls");
    std::fs::create_dir_all(&dir).expect("dir");
    let certificate = dir.join("cert.pem");
    let key = dir.join("key.pem");
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=trellis.test"])
        .args(["-addext", "subjectAltName=DNS:trellis.test,IP:127.0.0.1"])
        // A leaf, not a CA: webpki refuses a CA certificate as a server's own.
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args(["-addext", "extendedKeyUsage=serverAuth"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&certificate)
        .output();
    match made {
        Ok(output) if output.status.success() => Some((
            certificate.to_str().expect("UTF-8").to_owned(),
            key.to_str().expect("UTF-8").to_owned(),
        )),
        other => {
            eprintln!("skipping the TLS test: openssl could not make a certificate: {other:?}");
            None
        }
    }
}

#[tokio::test]
async fn serve_speaks_https_with_the_given_certificate() {
    let sandbox = Sandbox::new();
    let Some((certificate, key)) = self_signed(&sandbox) else {
        return;
    };
    let server = Server::start(
        &sandbox,
        TOKEN,
        None,
        &["--tls-cert", &certificate, "--tls-key", &key],
        &[],
    );
    assert_eq!(server.listening["tls"], json!(true));
    let address: std::net::SocketAddr = server
        .base
        .trim_start_matches("http://")
        .parse()
        .expect("address");
    let pem = std::fs::read(&certificate).expect("certificate");
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).expect("pem"))
        .resolve("trellis.test", address)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let url = format!("https://trellis.test:{}/api/v1/runs", address.port());
    let answer = client
        .get(&url)
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("an HTTPS request");
    assert_eq!(answer.status().as_u16(), 200);
    let body: Value = answer.json().await.expect("json");
    assert!(body["runs"].is_array(), "{body}");
    // Plain http to the TLS port gets no answer from the API.
    let plain = client
        .get(format!("http://{address}/api/v1/runs"))
        .bearer_auth(TOKEN)
        .send()
        .await;
    assert!(
        plain.is_err() || !plain.is_ok_and(|answer| answer.status().is_success()),
        "plain http was served"
    );
    // A client that does not trust the certificate does not get through.
    let untrusting = reqwest::Client::builder()
        .resolve("trellis.test", address)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    assert!(untrusting.get(&url).send().await.is_err());

    // The CLI reaches it as a named https target once told to trust the certificate
    // (SSL_CERT_FILE, read with the system's roots); without that it refuses the server.
    let targets = sandbox.home.with_file_name("targets.json");
    let targets = targets.to_str().expect("UTF-8 path").to_owned();
    let base = format!("https://{address}");
    let env = [("TRELLIS_TARGETS", targets.as_str()), (TOKEN_ENV, TOKEN)];
    sandbox
        .trellis_with_env(
            &["target", "add", "team", &base, "--token-env", TOKEN_ENV],
            &env,
        )
        .success();
    let trusted = [env[0], env[1], ("SSL_CERT_FILE", certificate.as_str())];
    let listed = sandbox
        .trellis_with_env(&["--target", "team", "list", "--json"], &trusted)
        .success();
    assert!(listed.json()["runs"].is_array(), "{listed:#?}");
    let refused = sandbox.trellis_with_env(&["--target", "team", "list", "--json"], &env);
    assert_ne!(refused.code, Some(0));
    assert!(refused.stderr.contains("certificate"), "{}", refused.stderr);
    let _ = server.kill();
}

#[tokio::test]
async fn bad_query_strings_and_control_characters_answer_problems() {
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, TOKEN, None, &[], &[]);
    let client = client();
    let query = client
        .get(format!("{}/api/v1/runs?limit=many", server.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("answered");
    assert_eq!(query.status().as_u16(), 400);
    let problem: Value = query.json().await.expect("a problem as JSON");
    assert_eq!(problem["code"], "request.invalid_query", "{problem}");
    for key in ["a\u{0}b", "line\nbreak", "bell\u{7}", "del\u{7f}"] {
        let answer = client
            .post(format!("{}/api/v1/runs", server.base))
            .bearer_auth(TOKEN)
            .json(&json!({"submissionKey": key, "graph": {}}))
            .send()
            .await
            .expect("answered");
        assert_eq!(answer.status().as_u16(), 400, "{key:?}");
        let problem: Value = answer.json().await.expect("a problem as JSON");
        assert_eq!(problem["code"], "request.invalid", "{problem}");
    }
    // A key the ledger refuses (empty) with a graph it admits: 400 run.invalid, not 500.
    let template = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../templates/single-worker.json"),
    )
    .expect("template");
    let graph: Value = serde_json::from_str(&template).expect("graph");
    let answer = client
        .post(format!("{}/api/v1/runs", server.base))
        .bearer_auth(TOKEN)
        .json(&json!({
            "submissionKey": "",
            "graph": graph,
            "task": "nothing",
            "plan": {"uniform": {"kind": "command", "command": ["true"]}},
            "noPreflight": true,
        }))
        .send()
        .await
        .expect("answered");
    let status = answer.status().as_u16();
    let problem: Value = answer.json().await.expect("a problem as JSON");
    assert_eq!(
        (status, problem["code"].as_str()),
        (400, Some("run.invalid")),
        "{problem}"
    );
    // A graph admission refuses, under a key: 422, and no workspace directory is left behind.
    let answer = client
        .post(format!("{}/api/v1/runs", server.base))
        .bearer_auth(TOKEN)
        .json(&json!({"submissionKey": "refused-1", "graph": {"profile": 1}}))
        .send()
        .await
        .expect("answered");
    assert_eq!(answer.status().as_u16(), 422);
    let left: Vec<_> = std::fs::read_dir(served_workspaces(&sandbox))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name())
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "refused submissions left {left:?}");
    let _ = server.kill();
}
