//! A JSON-RPC 2.0 connection to a long-lived child over its stdio, framed with
//! `Content-Length` headers (LSP style), as Copilot's headless mode speaks it.
//!
//! Two threads move bytes: one parses frames from stdout, one forwards stderr lines; both hand
//! what they read to the async side through one bounded channel, so a slow reader slows the
//! child instead of losing messages. Writes go through a third thread so a full stdin pipe
//! never blocks the runtime.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::ChildStdout;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use trellis_process::{ProcessEnd, ProcessSpec, Session};

/// Largest frame accepted; a longer one is skipped and reported.
const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;
/// Longest stderr line kept.
const MAX_STDERR_LINE: usize = 16 * 1024;
/// Messages read ahead of the async side.
const QUEUE: usize = 256;
/// How long a closed connection's child may take to leave before it is stopped.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// Something the child sent.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// One JSON-RPC message (request, response or notification).
    Message(Value),
    /// A frame that could not be used, and why.
    Garbled(String),
    /// One (redacted) stderr line.
    Stderr(String),
    /// Stdout ended: the child closed the connection.
    Closed,
}

/// A live connection; dropping it kills the child's process group.
pub(crate) struct RpcConnection {
    session: Session,
    outgoing: Option<std::sync::mpsc::Sender<Vec<u8>>>,
    incoming: mpsc::Receiver<Incoming>,
    next_id: u64,
}

impl RpcConnection {
    /// Starts `spec` and its reader and writer threads.
    pub fn start(spec: &ProcessSpec) -> Result<Self, String> {
        let (session, pipes) = Session::start_raw(spec, MAX_STDERR_LINE)?;
        let (tx, incoming) = mpsc::channel(QUEUE);
        let stdout_tx = tx.clone();
        let stdout = pipes.stdout;
        spawn_thread("trellis-rpc-read", move || read_frames(stdout, &stdout_tx))?;
        let stderr = pipes.stderr;
        spawn_thread("trellis-rpc-stderr", move || {
            for line in stderr {
                let text = line.text(MAX_STDERR_LINE);
                if tx.blocking_send(Incoming::Stderr(text)).is_err() {
                    return;
                }
            }
        })?;
        let (out_tx, out_rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let mut stdin = pipes.stdin;
        spawn_thread("trellis-rpc-write", move || {
            for frame in out_rx {
                if stdin
                    .write_all(&frame)
                    .and_then(|()| stdin.flush())
                    .is_err()
                {
                    return;
                }
            }
        })?;
        Ok(Self {
            session,
            outgoing: Some(out_tx),
            incoming,
            next_id: 0,
        })
    }

    pub fn pgid(&self) -> u32 {
        self.session.pgid()
    }

    /// Sends a request; returns its id.
    pub fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Answers a request of the child.
    pub fn respond(&mut self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    /// Refuses a request of the child.
    pub fn refuse(&mut self, id: &Value, code: i64, message: &str) {
        self.send(&json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": code, "message": message}}));
    }

    fn send(&mut self, message: &Value) {
        let body = message.to_string();
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(body.as_bytes());
        // A closed pipe shows up as `Incoming::Closed` on the reading side.
        if let Some(outgoing) = &self.outgoing {
            let _ = outgoing.send(frame);
        }
    }

    /// The next thing the child sent; `Closed` once it is gone.
    pub async fn next(&mut self) -> Incoming {
        self.incoming.recv().await.unwrap_or(Incoming::Closed)
    }

    /// How the child ended, once it has.
    pub fn end(&self) -> Option<ProcessEnd> {
        self.session.end()
    }

    /// Closes stdin, gives the child a moment to leave, then stops its whole group.
    pub async fn shut_down(mut self) -> ProcessEnd {
        self.outgoing = None;
        let session = self.session;
        tokio::task::spawn_blocking(move || {
            session
                .wait_end(EXIT_GRACE)
                .unwrap_or_else(|| session.stop(EXIT_GRACE))
        })
        .await
        .unwrap_or(ProcessEnd::Cancelled)
    }

    /// Stops the whole group now (SIGTERM, grace, SIGKILL).
    pub async fn stop(self) -> ProcessEnd {
        let session = self.session;
        tokio::task::spawn_blocking(move || session.stop(EXIT_GRACE))
            .await
            .unwrap_or(ProcessEnd::Cancelled)
    }
}

fn spawn_thread(name: &str, body: impl FnOnce() + Send + 'static) -> Result<(), String> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(body)
        .map(drop)
        .map_err(|e| format!("cannot start the {name} thread: {e}"))
}

/// Reads `Content-Length` frames until stdout ends.
fn read_frames(stdout: ChildStdout, tx: &mpsc::Sender<Incoming>) {
    let mut reader = BufReader::new(stdout);
    loop {
        let item = match read_frame(&mut reader) {
            Ok(Some(body)) => match serde_json::from_slice::<Value>(&body) {
                Ok(message) if message.is_object() => Incoming::Message(message),
                _ => Incoming::Garbled("a frame that is not a JSON object".to_owned()),
            },
            Ok(None) => {
                let _ = tx.blocking_send(Incoming::Closed);
                return;
            }
            Err(why) => Incoming::Garbled(why),
        };
        if tx.blocking_send(item).is_err() {
            return;
        }
    }
}

/// One frame's body; `None` at the end of the stream. A frame over [`MAX_FRAME_BYTES`] is read
/// past and reported.
fn read_frame(reader: &mut impl BufRead) -> Result<Option<Vec<u8>>, String> {
    let mut length = None;
    let mut line = String::new();
    loop {
        line.clear();
        let read = reader
            .read_line(&mut line)
            .map_err(|e| format!("reading a frame header failed: {e}"))?;
        if read == 0 {
            return Ok(None);
        }
        let header = line.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            if length.is_some() {
                break;
            }
            continue;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse::<usize>().ok();
        }
    }
    let length = length.unwrap_or(0);
    if length > MAX_FRAME_BYTES {
        std::io::copy(&mut reader.take(length as u64), &mut std::io::sink())
            .map_err(|e| format!("skipping an oversized frame failed: {e}"))?;
        return Err(format!(
            "a frame of {length} bytes (over {MAX_FRAME_BYTES}) was skipped"
        ));
    }
    let mut body = vec![0; length];
    reader
        .read_exact(&mut body)
        .map_err(|e| format!("a frame ended early: {e}"))?;
    Ok(Some(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_read_back_to_back_without_newlines() {
        let stream =
            b"Content-Length: 7\r\n\r\n{\"a\":1}Content-Length: 2\r\nContent-Type: x\r\n\r\n{}";
        let mut reader = BufReader::new(&stream[..]);
        assert_eq!(
            read_frame(&mut reader).unwrap().as_deref(),
            Some(&b"{\"a\":1}"[..])
        );
        assert_eq!(
            read_frame(&mut reader).unwrap().as_deref(),
            Some(&b"{}"[..])
        );
        assert_eq!(read_frame(&mut reader).unwrap(), None);
        let short = b"Content-Length: 9\r\n\r\n{}";
        assert!(read_frame(&mut BufReader::new(&short[..])).is_err());
    }
}
