//! Wake-ups for queue dispatch: an enqueue notifies `'<schema> !queued'` and a worker's
//! pushed lines or outcome `'<schema> !dispatch <run id>'` on the ledger's notification
//! channel, so idle worker hosts and a run's collector wait for a note instead of polling the
//! queue (a poll stays as the safety net: a note lost with the listener's connection only makes
//! a waiter slower, never stuck).

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::GenericClient;
use tokio::sync::{Mutex, broadcast, watch};

use crate::error::LedgerError;
use crate::ids::RunId;
use crate::postgres::PostgresStore;
use crate::postgres::error::server_error;
use crate::postgres::notify::{NOTIFY_CHANNEL, WAKE_ALL};

/// While the listener is not (yet) listening, a wait lasts at most this long: notes sent
/// meanwhile are not seen, so the waiter looks at the queue as often as it used to poll it.
const BLIND_WAIT: Duration = Duration::from_millis(50);
/// Added to a wait's own timeout for the I/O thread's budget.
const WAIT_SLACK: Duration = Duration::from_secs(5);

/// What a dispatch waiter wakes for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DispatchNote {
    /// Something was queued (for a worker host).
    Queued,
    /// A worker pushed lines or an outcome for an execution of this run (for its collector).
    Dispatch(RunId),
}

/// The payload of `note` in `schema`.
pub(super) fn payload(schema: &str, note: &DispatchNote) -> String {
    match note {
        DispatchNote::Queued => format!("{schema} !queued"),
        DispatchNote::Dispatch(run_id) => format!("{schema} !dispatch {run_id}"),
    }
}

/// Sends `note` on the ledger's channel (inside `client`'s transaction, if it is one: then it
/// goes out when that commits).
pub(super) async fn send(
    client: &impl GenericClient,
    schema: &str,
    note: &DispatchNote,
) -> Result<(), LedgerError> {
    let statement = client
        .prepare_cached("SELECT pg_notify($1, $2)")
        .await
        .map_err(server_error)?;
    client
        .execute(&statement, &[&NOTIFY_CHANNEL, &payload(schema, note)])
        .await
        .map_err(server_error)
        .map(drop)
}

/// One waiter's subscription: notes that arrive between two waits are kept (up to the
/// listener's fan-out capacity) and end the next wait at once.
#[derive(Clone)]
pub struct DispatchWaiter {
    notices: Arc<Mutex<broadcast::Receiver<Arc<str>>>>,
    listening: watch::Receiver<bool>,
    wanted: Arc<str>,
}

impl PostgresStore {
    /// Subscribes to `note` (starting the store's listener if nobody listens yet). Subscribe
    /// before the first look at the queue, so no note sent after that look is missed.
    pub fn dispatch_waiter(&self, note: DispatchNote) -> Result<DispatchWaiter, LedgerError> {
        self.call(move |shared| async move {
            let (notices, listening) = shared.listener.subscribe();
            Ok(DispatchWaiter {
                notices: Arc::new(Mutex::new(notices)),
                listening,
                wanted: Arc::from(payload(&shared.schema, &note)),
            })
        })
    }

    /// Waits until a note `waiter` wants has arrived since its previous wait, or `timeout`
    /// passes; true when a note (or a reconnected listener, which may have missed some) woke it.
    pub fn wait_for_note(
        &self,
        waiter: &DispatchWaiter,
        timeout: Duration,
    ) -> Result<bool, LedgerError> {
        let waiter = waiter.clone();
        self.bridge.call(timeout + WAIT_SLACK, async move {
            let limit = match *waiter.listening.borrow() {
                true => timeout,
                false => timeout.min(BLIND_WAIT),
            };
            let mut notices = waiter.notices.lock().await;
            let woke = tokio::time::timeout(limit, async {
                loop {
                    match notices.recv().await {
                        Ok(note) if *note == *waiter.wanted || &*note == WAKE_ALL => return true,
                        Ok(_) => {}
                        // Some notes were dropped: one of them may have been ours.
                        Err(broadcast::error::RecvError::Lagged(_)) => return true,
                        Err(broadcast::error::RecvError::Closed) => {
                            std::future::pending::<()>().await;
                        }
                    }
                }
            })
            .await;
            Ok(woke.unwrap_or(false))
        })
    }
}
