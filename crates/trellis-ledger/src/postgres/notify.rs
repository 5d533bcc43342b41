//! Waking followers and dispatchers: every append sends `NOTIFY trellis_ledger, '<schema> <run
//! id>'` inside its transaction, and the dispatch queue sends its notes on channels of their own
//! (`dispatch_notes.rs`). One listening connection per store (opened by the first wait) listens
//! on the channels its waiters asked for, and fans the notifications out to them (`wait.rs`
//! holds the followers' side).
//!
//! Channels are split by who wants them because PostgreSQL delivers a notification to every
//! connection listening on its channel: on one shared channel, each of thirty run controllers
//! was woken by every other run's appends and outcomes. A controller started by a host that
//! already listens asks that host instead of listening itself (`relay.rs`), and falls back to
//! its own connection once the host is gone.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio_postgres::{AsyncMessage, Client, Config, NoTls};

use crate::postgres::note::{ListenRequest, Note};

/// The channel of run appends (followers of any run of any Trellis ledger on a database).
pub(super) const NOTIFY_CHANNEL: &str = "trellis_ledger";
/// How many notifications may queue for a slow waiter before it just re-reads the cursor.
const FAN_OUT_CAPACITY: usize = 1024;
/// Pause between attempts to (re)connect the listener.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);
/// Longest a new subscription waits for its `LISTEN` (past it, the waiter polls as it does
/// while the listener is not connected).
const LISTEN_WAIT: Duration = Duration::from_secs(2);

/// The listening connection of one store and the waiters it wakes.
pub(super) struct Listener {
    config: Config,
    started: AtomicBool,
    /// Every channel asked for: (re)listened on each connect.
    channels: Mutex<BTreeSet<String>>,
    requests: mpsc::UnboundedSender<ListenRequest>,
    pending: Mutex<Option<mpsc::UnboundedReceiver<ListenRequest>>>,
    pub(super) notices: broadcast::Sender<Arc<Note>>,
    pub(super) listening: watch::Sender<bool>,
    /// A connection to a host relaying its notes (`relay.rs`), used instead of a listening
    /// connection of our own until it closes.
    relay: Mutex<Option<std::os::unix::net::UnixStream>>,
}

impl Listener {
    pub(super) fn new(config: Config) -> Self {
        let (requests, pending) = mpsc::unbounded_channel();
        Self {
            config,
            started: AtomicBool::new(false),
            channels: Mutex::new(BTreeSet::new()),
            requests,
            pending: Mutex::new(Some(pending)),
            notices: broadcast::channel(FAN_OUT_CAPACITY).0,
            listening: watch::channel(false).0,
            relay: Mutex::new(None),
        }
    }

    /// Takes notes from the host at the other end of `relay` rather than listening on a
    /// connection of this store's own, from the first subscription on and for as long as the
    /// relay stays up. Set before anything waits: a listener already started keeps its way.
    pub(super) fn listen_through(&self, relay: std::os::unix::net::UnixStream) {
        *lock(&self.relay) = Some(relay);
    }

    /// Every channel asked for so far.
    pub(super) fn channels(&self) -> Vec<String> {
        lock(&self.channels).iter().cloned().collect()
    }

    /// Subscribes a waiter to `channel`, starting the listener task on first use. Returns once
    /// the connection listens on it (or is not connected: then the waiter polls, and the
    /// reconnect's wake-up covers what it missed), so a note sent after this returns is seen.
    pub(super) async fn subscribe(
        self: &Arc<Self>,
        channel: &str,
    ) -> (broadcast::Receiver<Arc<Note>>, watch::Receiver<bool>) {
        let receivers = (self.notices.subscribe(), self.listening.subscribe());
        let new = lock(&self.channels).insert(channel.to_owned());
        if !self.started.swap(true, Ordering::SeqCst) {
            let pending = lock(&self.pending).take();
            if let Some(pending) = pending {
                tokio::spawn(listen(Arc::clone(self), pending));
            }
        } else if new {
            let (done, listened) = oneshot::channel();
            if self.requests.send((channel.to_owned(), done)).is_ok() {
                let _ = tokio::time::timeout(LISTEN_WAIT, listened).await;
            }
        }
        receivers
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn listen_on(client: &Client, channel: &str) -> bool {
    // Channel names are ours (fixed words and hex digits), quoted all the same.
    let quoted = channel.replace('"', "\"\"");
    client
        .batch_execute(&format!("LISTEN \"{quoted}\""))
        .await
        .is_ok()
}

/// Keeps one connection listening for as long as the store lives (the task ends with the
/// store's runtime), reconnecting after failures.
async fn listen(listener: Arc<Listener>, mut requests: mpsc::UnboundedReceiver<ListenRequest>) {
    let relay = lock(&listener.relay).take();
    if let Some(relay) = relay {
        let channels = listener.channels();
        super::relay::follow(
            channels,
            &mut requests,
            &listener.notices,
            &listener.listening,
            relay,
        )
        .await;
    }
    loop {
        if let Ok((client, mut connection)) = listener.config.connect(NoTls).await {
            let notices = listener.notices.clone();
            let mut pump = tokio::spawn(async move {
                while let Some(message) =
                    std::future::poll_fn(|cx| connection.poll_message(cx)).await
                {
                    match message {
                        Ok(AsyncMessage::Notification(note)) => {
                            let _ = notices.send(Arc::new(Note {
                                channel: note.channel().to_owned(),
                                payload: note.payload().to_owned(),
                            }));
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
            });
            let channels = listener.channels();
            let mut all = true;
            for channel in &channels {
                all &= listen_on(&client, channel).await;
            }
            if all {
                listener.listening.send_replace(true);
                let _ = listener.notices.send(Note::wake_all());
            }
            loop {
                tokio::select! {
                    _ = &mut pump => break,
                    request = requests.recv() => {
                        let Some((channel, done)) = request else { break };
                        if !listen_on(&client, &channel).await {
                            // The connection failed: the next one listens on every channel.
                            let _ = done.send(());
                            pump.abort();
                            break;
                        }
                        let _ = done.send(());
                    }
                }
            }
            listener.listening.send_replace(false);
            drop(client);
        }
        // Requests made while disconnected are in `channels`: the next connect listens.
        while let Ok((_, done)) = requests.try_recv() {
            let _ = done.send(());
        }
        tokio::time::sleep(RECONNECT_PAUSE).await;
    }
}
