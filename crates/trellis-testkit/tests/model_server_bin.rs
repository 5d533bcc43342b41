//! Tests of the `trellis-model-server` binary: it serves a script file and prints its URLs.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serves_a_script_file_and_records_requests() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    let record = dir.path().join("record.jsonl");
    std::fs::write(
        &script,
        r#"{"conversations": [{"name": "only", "turns": [
            {"reply": [{"type": "text", "text": "hi from the script"}], "usage": {"input_tokens": 3, "output_tokens": 4}}
        ]}]}"#,
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_trellis-model-server"))
        .arg(&script)
        .arg("--record")
        .arg(&record)
        .arg("--quiet")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let mut lines = BufReader::new(server.0.stdout.take().unwrap()).lines();
    let anthropic = lines.next().unwrap().unwrap();
    let openai = lines.next().unwrap().unwrap();
    let url = anthropic
        .strip_prefix("ANTHROPIC_BASE_URL=")
        .unwrap()
        .to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert_eq!(openai, format!("OPENAI_BASE_URL={url}/v1"));

    let body = r#"{"model":"m","stream":false,"messages":[{"role":"user","content":"hello"}]}"#;
    let mut stream = TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    write!(
        stream,
        "POST /v1/messages HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("hi from the script"));
    assert!(answer.contains("\"output_tokens\":4"));

    let recorded = std::fs::read_to_string(&record).unwrap();
    let line: serde_json::Value = serde_json::from_str(recorded.lines().next().unwrap()).unwrap();
    assert_eq!(line["conversation"], "only");
    assert_eq!(line["outcome"]["kind"], "replied");
    assert_eq!(line["user_text"], "hello");
}

#[test]
fn rejects_an_invalid_script_with_usage_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("bad.json");
    std::fs::write(
        &script,
        r#"{"conversations": [{"name": "x", "turns": []}]}"#,
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_trellis-model-server"))
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("has no turns"));
}
