//! One listening connection per host: a host that starts run controllers hands each one end
//! of a socket pair, listens on its behalf and forwards the notes on the channels it asked for.
//!
//! Why: a controller listening on a connection of its own holds one more PostgreSQL connection
//! for its whole run (thirty runs, thirty connections against `max_connections`), and one more
//! backend that PostgreSQL up to 18 signals on every notifying commit, whatever the channel.
//! Through the relay a host's controllers add neither. A controller whose relay closes (its host
//! stopped or restarted) listens on a connection of its own from then on, and wakes its waiters
//! since notes may have been lost.
//!
//! The wire is JSON lines: the controller sends `listen`, the host answers `listened` once it
//! listens on that channel, then `note` for every notification on it and `state` whenever its
//! own connection starts or stops listening. This file holds the wire and the controller's
//! side; `relay_host.rs` the host's.

use std::collections::VecDeque;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::{broadcast, mpsc, oneshot, watch};

use crate::postgres::note::{ListenRequest, Note};

/// What a controller asks its host.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(super) enum Request {
    Listen { channel: String },
}

/// What the host tells a controller.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(super) enum Tell {
    /// The host listens on `channel`: a note sent from now on is forwarded.
    Listened {
        channel: String,
    },
    Note {
        channel: String,
        payload: String,
    },
    /// Whether the host's own connection listens (while it does not, waiters poll).
    State {
        listening: bool,
    },
}

/// Writes `message` as one line; false once the other end is gone.
pub(super) async fn send<T: Serialize>(
    writer: &mut (impl AsyncWrite + Unpin),
    message: &T,
) -> bool {
    let Ok(mut line) = serde_json::to_vec(message) else {
        return false;
    };
    line.push(b'\n');
    writer.write_all(&line).await.is_ok()
}

/// The stream as the I/O runtime drives it (`None` if it cannot be made non-blocking).
pub(super) fn to_tokio(stream: std::os::unix::net::UnixStream) -> Option<UnixStream> {
    stream.set_nonblocking(true).ok()?;
    UnixStream::from_std(stream).ok()
}

/// The controller's side: asks the host for every channel its waiters want and hands the
/// host's notes to them, until the relay closes. Then every waiter is told to look again and
/// the caller listens on a connection of its own.
pub(super) async fn follow(
    channels: Vec<String>,
    requests: &mut mpsc::UnboundedReceiver<ListenRequest>,
    notices: &broadcast::Sender<Arc<Note>>,
    listening: &watch::Sender<bool>,
    stream: std::os::unix::net::UnixStream,
) {
    let Some(stream) = to_tokio(stream) else {
        return;
    };
    let (reader, mut writer) = stream.into_split();
    let mut lines = BufReader::new(reader).lines();
    // Answers arrive in the order the requests went out.
    let mut awaiting: VecDeque<Option<oneshot::Sender<()>>> = VecDeque::new();
    for channel in channels {
        if !send(&mut writer, &Request::Listen { channel }).await {
            return;
        }
        awaiting.push_back(None);
    }
    let mut first_answers = awaiting.len();
    if first_answers == 0 {
        let _ = notices.send(Note::wake_all());
    }
    loop {
        tokio::select! {
            request = requests.recv() => {
                let Some((channel, done)) = request else { break };
                if !send(&mut writer, &Request::Listen { channel }).await {
                    // The channel is in the listener's set: the own connection listens on it.
                    let _ = done.send(());
                    break;
                }
                awaiting.push_back(Some(done));
            }
            line = lines.next_line() => {
                let Ok(Some(line)) = line else { break };
                match serde_json::from_str::<Tell>(&line) {
                    Ok(Tell::Listened { .. }) => {
                        if let Some(Some(done)) = awaiting.pop_front() {
                            let _ = done.send(());
                        }
                        if first_answers > 0 {
                            first_answers -= 1;
                            if first_answers == 0 {
                                // Notes sent before the host listened were not seen.
                                let _ = notices.send(Note::wake_all());
                            }
                        }
                    }
                    Ok(Tell::Note { channel, payload }) => {
                        let _ = notices.send(Arc::new(Note { channel, payload }));
                    }
                    Ok(Tell::State { listening: state }) => {
                        listening.send_replace(state);
                    }
                    Err(_) => {}
                }
            }
        }
    }
    listening.send_replace(false);
    for done in awaiting.into_iter().flatten() {
        let _ = done.send(());
    }
}
