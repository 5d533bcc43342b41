//! The host's side of the notes relay (`relay.rs`): for each controller it started, listen on
//! the channels it asks for and forward their notes, until the controller hangs up.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::broadcast;

use crate::postgres::note::Note;
use crate::postgres::notify::Listener;
use crate::postgres::relay::{Request, Tell, send, to_tokio};

/// The host's side for one controller: listens on what it asks for (on the host's own
/// listening connection) and forwards those notes, until the controller hangs up.
pub(super) async fn serve(listener: Arc<Listener>, stream: std::os::unix::net::UnixStream) {
    let Some(stream) = to_tokio(stream) else {
        return;
    };
    let mut notices = listener.notices.subscribe();
    let mut listening = listener.listening.subscribe();
    let (reader, mut writer) = stream.into_split();
    let mut lines = BufReader::new(reader).lines();
    let mut wanted: HashSet<String> = HashSet::new();
    let state = *listening.borrow_and_update();
    if !send(&mut writer, &Tell::State { listening: state }).await {
        return;
    }
    loop {
        let told = tokio::select! {
            line = lines.next_line() => {
                let Ok(Some(line)) = line else { return };
                match serde_json::from_str::<Request>(&line) {
                    Ok(Request::Listen { channel }) => {
                        let _ = listener.subscribe(&channel).await;
                        wanted.insert(channel.clone());
                        send(&mut writer, &Tell::Listened { channel }).await
                    }
                    // Nothing else is ever sent; a garbled line asks for nothing.
                    Err(_) => true,
                }
            }
            note = notices.recv() => match note {
                Ok(note) if note.is_wake_all() || wanted.contains(&note.channel) => {
                    send(&mut writer, &forwarded(&note)).await
                }
                Ok(_) => true,
                // Some notes were dropped before we forwarded them: the controller re-looks.
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    send(&mut writer, &forwarded(&Note::wake_all())).await
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            changed = listening.changed() => {
                if changed.is_err() {
                    return;
                }
                let listening = *listening.borrow_and_update();
                send(&mut writer, &Tell::State { listening }).await
            }
        };
        if !told {
            return;
        }
    }
}

/// `note` as it goes down the relay.
fn forwarded(note: &Note) -> Tell {
    Tell::Note {
        channel: note.channel.clone(),
        payload: note.payload.clone(),
    }
}
