//! Waking followers: every append sends `NOTIFY trellis_ledger, '<schema> <run id>'` inside
//! its transaction; one listening connection per store (opened by the first wait) fans the
//! notifications out to waiting calls. A waiter still re-reads the cursor now and then, so a
//! lost listener connection only makes it slower, never stuck.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::time::Instant;
use tokio_postgres::{AsyncMessage, Config, NoTls};

use crate::cursor::Cursor;
use crate::error::LedgerError;
use crate::ids::RunId;
use crate::postgres::Shared;
use crate::postgres::runs::latest_cursor;
use crate::store::cursor_ahead;

/// The notification channel of every Trellis ledger on a database.
pub(super) const NOTIFY_CHANNEL: &str = "trellis_ledger";
/// Sent to every waiter after the listener (re)connects: anything may have been missed.
const WAKE_ALL: &str = "*";
/// How many notifications may queue for a slow waiter before it just re-reads the cursor.
const FAN_OUT_CAPACITY: usize = 1024;
/// Re-read the cursor at least this often while listening works…
const SAFETY_POLL: Duration = Duration::from_secs(5);
/// …and this often while it does not (no connection yet, or reconnecting).
const FALLBACK_POLL: Duration = Duration::from_millis(200);
/// Pause between attempts to (re)connect the listener.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);
/// Longest single wait; longer requests return the current cursor after this.
const MAX_WAIT: Duration = Duration::from_secs(3600);

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
    fn subscribe(self: &Arc<Self>) -> (broadcast::Receiver<Arc<str>>, watch::Receiver<bool>) {
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

/// Waits until the run has events after `after` or `timeout` passes; returns the latest
/// cursor either way.
pub(super) async fn wait_for_change(
    shared: Arc<Shared>,
    run_id: RunId,
    after: Cursor,
    timeout: Duration,
) -> Result<Cursor, LedgerError> {
    let deadline = Instant::now() + timeout.min(MAX_WAIT);
    let wanted = format!("{} {}", shared.schema, run_id);
    // Subscribed before the first look: an append committed after it is either notified or,
    // when the listener is only now connecting, covered by the wake-up it sends once it
    // listens.
    let (mut notices, listening) = shared.listener.subscribe();
    loop {
        let latest = latest_cursor(&shared, &run_id).await?;
        if latest < after {
            return Err(cursor_ahead(&run_id, after, latest));
        }
        let now = Instant::now();
        if latest > after || now >= deadline {
            return Ok(latest);
        }
        let poll = if *listening.borrow() {
            SAFETY_POLL
        } else {
            FALLBACK_POLL
        };
        let nap_end = deadline.min(now + poll);
        let _ = tokio::time::timeout_at(nap_end, async {
            loop {
                match notices.recv().await {
                    Ok(note) if *note == *wanted || &*note == WAKE_ALL => return,
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => return,
                    Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
                }
            }
        })
        .await;
    }
}
