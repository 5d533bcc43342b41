//! Wake-ups for queue dispatch: an enqueue notifies `'<schema> !queued'` on the queue's
//! channel and a worker's pushed lines or outcome `'<schema> !dispatch <run id>'` on the run's
//! own channel, so idle worker hosts and a run's collector wait for a note instead of polling
//! the queue, and nobody else is woken by them (a poll stays as the safety net: a note lost
//! with the listener's connection only makes a waiter slower, never stuck).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, broadcast, watch};

use crate::error::LedgerError;
use crate::ids::RunId;
use crate::postgres::PostgresStore;
use crate::postgres::note::Note;

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

/// The payload of `note` in `schema`; the statements that queue, push or settle send it with
/// `pg_notify` in the same statement, so it goes out when their change commits.
pub(super) fn payload(schema: &str, note: &DispatchNote) -> String {
    match note {
        DispatchNote::Queued => format!("{schema} !queued"),
        DispatchNote::Dispatch(run_id) => format!("{schema} !dispatch {run_id}"),
    }
}

/// The channel `note` goes on: one for the queue (every worker host wants it), one per run for
/// its collector (only that run's controller wants it). A per-run channel is named by a digest
/// of the schema and run id, as channel names are at most 63 bytes; two runs sharing one by
/// chance only wake each other, the payload still tells them apart.
pub fn channel(schema: &str, note: &DispatchNote) -> String {
    use sha2::{Digest, Sha256};
    match note {
        DispatchNote::Queued => "trellis_queue".to_owned(),
        DispatchNote::Dispatch(run_id) => {
            let digest = Sha256::digest(format!("{schema} {run_id}").as_bytes());
            format!("trellis_run_{}", hex::encode(&digest[..12]))
        }
    }
}

/// One waiter's subscription: notes that arrive between two waits are kept (up to the
/// listener's fan-out capacity) and end the next wait at once.
#[derive(Clone)]
pub struct DispatchWaiter {
    notices: Arc<Mutex<broadcast::Receiver<Arc<Note>>>>,
    listening: watch::Receiver<bool>,
    wanted: Arc<str>,
}

impl PostgresStore {
    /// Subscribes to `note` (starting the store's listener if nobody listens yet). Subscribe
    /// before the first look at the queue, so no note sent after that look is missed.
    pub fn dispatch_waiter(&self, note: DispatchNote) -> Result<DispatchWaiter, LedgerError> {
        self.call(move |shared| async move {
            let (notices, listening) = shared
                .listener
                .subscribe(&channel(&shared.schema, &note))
                .await;
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
                        Ok(note) if note.wakes(&waiter.wanted) => return true,
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
