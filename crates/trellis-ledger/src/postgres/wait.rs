//! Waiting for a run's next event on PostgreSQL: woken by the store's notification listener
//! (`notify.rs`), a waiter still re-reads the cursor now and then, so a lost listener
//! connection only makes it slower, never stuck.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::cursor::Cursor;
use crate::error::{LedgerError, cursor_ahead};
use crate::ids::RunId;
use crate::postgres::notify::NOTIFY_CHANNEL;
use crate::postgres::runs::latest_cursor;
use crate::postgres::shared::Shared;

/// Re-read the cursor at least this often while listening works…
const SAFETY_POLL: Duration = Duration::from_secs(5);
/// …and this often while it does not (no connection yet, or reconnecting).
const FALLBACK_POLL: Duration = Duration::from_millis(200);
/// Longest single wait; longer requests return the current cursor after this.
const MAX_WAIT: Duration = Duration::from_secs(3600);

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
    let (mut notices, listening) = shared.listener.subscribe(NOTIFY_CHANNEL).await;
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
                    Ok(note) if note.wakes(&wanted) => return,
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => return,
                    Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
                }
            }
        })
        .await;
    }
}
