//! One thread per queued run that puts its executions in the ledger's queue in batches: every
//! execution the engine starts while a batch is being written goes into the next one, so a map
//! that starts hundreds at once costs a few transactions instead of one each.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};

use tokio::sync::oneshot;
use trellis_ledger::postgres::leases::Dispatch;
use trellis_ledger::{LedgerError, RunId, RunStore};

/// Most executions one transaction queues.
const MOST_PER_BATCH: usize = 256;

/// What a waiting execution hears back: queued, or why not.
type Answer = oneshot::Sender<Result<(), String>>;

/// The sending side, held by the run's queue; the thread ends when it is dropped.
pub(crate) struct Enqueuer {
    requests: Sender<(Dispatch, Answer)>,
}

impl Enqueuer {
    pub(crate) fn start(
        store: Arc<dyn RunStore>,
        run_id: RunId,
        token: i64,
    ) -> std::io::Result<Self> {
        let (requests, batches) = channel();
        std::thread::Builder::new()
            .name("trellis-enqueue".into())
            .spawn(move || write_batches(store.as_ref(), &run_id, token, &batches))?;
        Ok(Self { requests })
    }

    /// Queues `dispatch` with whatever else is waiting; answers once it is in the ledger.
    pub(crate) async fn enqueue(&self, dispatch: Dispatch) -> Result<(), String> {
        let (answer, answered) = oneshot::channel();
        self.requests
            .send((dispatch, answer))
            .map_err(|_| "the queueing thread stopped".to_owned())?;
        answered
            .await
            .map_err(|_| "the queueing thread stopped".to_owned())?
    }
}

fn write_batches(
    store: &dyn RunStore,
    run_id: &RunId,
    token: i64,
    batches: &Receiver<(Dispatch, Answer)>,
) {
    while let Ok(first) = batches.recv() {
        let mut batch = vec![first];
        while batch.len() < MOST_PER_BATCH {
            match batches.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let (dispatches, answers): (Vec<Dispatch>, Vec<Answer>) = batch.into_iter().unzip();
        let written = match store.as_postgres() {
            Some(postgres) => postgres.enqueue(run_id, token, dispatches),
            None => Err(LedgerError::Fenced {
                detail: "the dispatch queue needs a PostgreSQL ledger".into(),
            }),
        };
        for answer in answers {
            let _ = answer.send(written.as_ref().map(|_| ()).map_err(ToString::to_string));
        }
    }
}
