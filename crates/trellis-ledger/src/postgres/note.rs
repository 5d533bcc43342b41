//! One notification as a store's waiters see it, and a request to listen for more.

use std::sync::Arc;

use tokio::sync::oneshot;

/// Sent to every waiter when notes may have been missed (a listener (re)connected, a relay
/// answered or closed, a slow reader fell behind).
const WAKE_ALL: &str = "*";

/// A channel to start listening on, and who to tell once it listens.
pub(super) type ListenRequest = (String, oneshot::Sender<()>);

/// One notification: the channel it came on and its payload.
#[derive(Debug)]
pub(super) struct Note {
    pub(super) channel: String,
    pub(super) payload: String,
}

impl Note {
    /// The note telling every waiter that notes may have been missed.
    pub(super) fn wake_all() -> Arc<Self> {
        Arc::new(Self {
            channel: WAKE_ALL.to_owned(),
            payload: WAKE_ALL.to_owned(),
        })
    }

    pub(super) fn is_wake_all(&self) -> bool {
        self.channel == WAKE_ALL && self.payload == WAKE_ALL
    }

    /// Whether a waiter for `payload` wakes for this note.
    pub(super) fn wakes(&self, payload: &str) -> bool {
        self.payload == payload || self.is_wake_all()
    }
}
