//! Waking followers: every append sends `NOTIFY trellis_ledger, '<schema> <run id>'` inside
//! its transaction; one listening connection per store (opened by the first wait) fans the
//! notifications out to waiting calls (`wait.rs` holds the waiting side).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio_postgres::{AsyncMessage, Config, NoTls};

/// The notification channel of every Trellis ledger on a database.
pub(super) const NOTIFY_CHANNEL: &str = "trellis_ledger";
/// Sent to every waiter after the listener (re)connects: anything may have been missed.
pub(super) const WAKE_ALL: &str = "*";
/// How many notifications may queue for a slow waiter before it just re-reads the cursor.
const FAN_OUT_CAPACITY: usize = 1024;
/// Pause between attempts to (re)connect the listener.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// The listening connection of one store and the waiters it wakes.
pub(super) struct Listener {
    config: Config,
    started: AtomicBool,
    notices: broadcast::Sender<Arc<str>>,
    listening: watch::Sender<bool>,
}

impl Listener {
    pub(super) fn new(config: Config) -> Self {
        Self {
            config,
            started: AtomicBool::new(false),
            notices: broadcast::channel(FAN_OUT_CAPACITY).0,
            listening: watch::channel(false).0,
        }
    }

    /// Subscribes a waiter, starting the listener task on first use.
    pub(super) fn subscribe(
        self: &Arc<Self>,
    ) -> (broadcast::Receiver<Arc<str>>, watch::Receiver<bool>) {
        let receivers = (self.notices.subscribe(), self.listening.subscribe());
        if !self.started.swap(true, Ordering::SeqCst) {
            tokio::spawn(listen(Arc::clone(self)));
        }
        receivers
    }
}

/// Keeps one connection listening for as long as the store lives (the task ends with the
/// store's runtime), reconnecting after failures.
async fn listen(listener: Arc<Listener>) {
    loop {
        if let Ok((client, mut connection)) = listener.config.connect(NoTls).await {
            let notices = listener.notices.clone();
            let pump = tokio::spawn(async move {
                while let Some(message) =
                    std::future::poll_fn(|cx| connection.poll_message(cx)).await
                {
                    match message {
                        Ok(AsyncMessage::Notification(note)) => {
                            let _ = notices.send(Arc::from(note.payload()));
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
            });
            if client
                .batch_execute(&format!("LISTEN {NOTIFY_CHANNEL}"))
                .await
                .is_ok()
            {
                listener.listening.send_replace(true);
                let _ = listener.notices.send(Arc::from(WAKE_ALL));
            }
            let _ = pump.await;
            listener.listening.send_replace(false);
            drop(client);
        }
        tokio::time::sleep(RECONNECT_PAUSE).await;
    }
}
