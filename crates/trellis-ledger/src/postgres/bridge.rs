//! The synchronous face of an asynchronous driver: a dedicated thread owns a tokio runtime
//! and the connections; callers hand it jobs and block on a reply channel.
//!
//! `RunStore` is synchronous and is called from plain threads and from tokio worker threads
//! alike. Entering a runtime from inside another one panics, so the store never does: its
//! runtime is built, driven and dropped on its own thread, and a caller only ever blocks on a
//! standard channel — as it blocks on the SQLite file lock. In-flight jobs are bounded by the
//! number of blocked callers (each waits for its reply), so the job queue needs no bound.

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::error::LedgerError;

type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The dedicated thread and the queue of jobs it runs.
pub(super) struct Bridge {
    jobs: Option<mpsc::UnboundedSender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Bridge {
    /// Starts the thread and runs `setup` there first (connect, migrate); its result is
    /// returned once it finishes, or within `setup_timeout`.
    pub(super) fn start<S, F>(
        setup: impl FnOnce() -> F + Send + 'static,
        setup_timeout: Duration,
    ) -> Result<(Self, S), LedgerError>
    where
        S: Send + 'static,
        F: Future<Output = Result<S, LedgerError>> + 'static,
    {
        let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
        let (ready_tx, ready_rx) = std_mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("trellis-ledger-pg".to_owned())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(_) => {
                        let _ = ready_tx.send(Err(LedgerError::Internal {
                            detail: "cannot start the ledger's I/O runtime".to_owned(),
                        }));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let outcome = tokio::time::timeout(setup_timeout, setup())
                        .await
                        .unwrap_or_else(|_| {
                            Err(LedgerError::unavailable(
                                "the ledger server did not answer in time",
                            ))
                        });
                    let failed = outcome.is_err();
                    if ready_tx.send(outcome).is_err() || failed {
                        return;
                    }
                    while let Some(job) = queue.recv().await {
                        tokio::spawn(job);
                    }
                });
            })
            .map_err(|_| LedgerError::Internal {
                detail: "cannot start the ledger's I/O thread".to_owned(),
            })?;
        let mut bridge = Self {
            jobs: Some(jobs),
            thread: Some(thread),
        };
        match ready_rx.recv() {
            Ok(Ok(state)) => Ok((bridge, state)),
            Ok(Err(error)) => Err(error),
            Err(_) => {
                bridge.jobs = None;
                Err(stopped())
            }
        }
    }

    /// Runs `job` on the I/O thread and waits for its result, at most `budget`.
    pub(super) fn call<T, F>(&self, budget: Duration, job: F) -> Result<T, LedgerError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, LedgerError>> + Send + 'static,
    {
        let jobs = self.jobs.as_ref().ok_or_else(stopped)?;
        let (reply, answer) = std_mpsc::sync_channel(1);
        let task = async move {
            let result = tokio::time::timeout(budget, job).await.unwrap_or_else(|_| {
                Err(LedgerError::unavailable(
                    "the ledger server did not answer in time",
                ))
            });
            // The caller may be gone only if its thread panicked; nothing to do then.
            let _ = reply.send(result);
        };
        jobs.send(Box::pin(task)).map_err(|_| stopped())?;
        answer.recv().map_err(|_| stopped())?
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // Closing the queue ends the thread's loop; its runtime (and every connection) is
        // dropped there. Joining makes "store dropped" mean "connections closed".
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn stopped() -> LedgerError {
    LedgerError::unavailable("the ledger's I/O thread stopped")
}
