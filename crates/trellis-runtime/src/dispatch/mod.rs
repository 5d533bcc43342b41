//! Dispatch of a run's work over hosts on a PostgreSQL ledger, controller side: the
//! controller's lease row (taken, renewed, and fencing every append), node executions handed
//! to worker hosts through the ledger's dispatch queue (`queued`) with their workspaces for hosts
//! that do not share this one's filesystem (`remote_workspace`), and taking over the runs of
//! controllers that are gone (`takeover`). The worker host itself is `worker_host`.

mod enqueuer;
pub(crate) mod queued;
pub(crate) mod remote_workspace;
pub(crate) mod takeover;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use trellis_ledger::postgres::leases::ControllerLease;
use trellis_ledger::{
    Admission, Cursor, EventFilter, LedgerError, ListedRun, NewRun, PostgresStore, RunEvent,
    RunFilter, RunHead, RunId, RunRecord, RunSnapshot, RunStore, StoredEvent,
};

use crate::control::spawn::{CONTROLLER_LEASE_ENV, DISPATCH_ENV};
use crate::shared::error::RuntimeError;

const DEFAULT_CONTROLLER_LEASE: Duration = Duration::from_secs(15);
/// The shortest lease a setting may ask for: renewals must fit inside it.
const MIN_LEASE: Duration = Duration::from_millis(300);

/// Whether this controller hands executions to worker hosts (only on a PostgreSQL ledger).
pub(crate) fn dispatch_to_workers() -> bool {
    std::env::var(DISPATCH_ENV).is_ok_and(|value| value.trim() == "queue")
}

/// Where a controller runs its command and agent executions: a setting of the host that
/// starts controllers (`trellis serve --dispatch`), handed to each one in [`DISPATCH_ENV`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatchMode {
    /// As the controller's own children, on the host that drives the run.
    Local,
    /// Queued in the ledger for `trellis worker` hosts (PostgreSQL ledgers only).
    Queue,
}

impl DispatchMode {
    /// The value [`DISPATCH_ENV`] carries.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Queue => "queue",
        }
    }
}

/// Sets a controller's [`DISPATCH_ENV`] to `mode` when the host chose one (else what the host
/// inherited stays, the fallback).
pub(crate) fn apply_dispatch(env: &mut Vec<(String, String)>, mode: Option<DispatchMode>) {
    if let Some(mode) = mode {
        env.retain(|(name, _)| name != DISPATCH_ENV);
        env.push((DISPATCH_ENV.to_owned(), mode.as_str().to_owned()));
    }
}

/// A duration in milliseconds from `variable`, at least [`MIN_LEASE`], else `default`.
pub(crate) fn lease_setting(variable: &str, default: Duration) -> Duration {
    std::env::var(variable)
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok())
        .map(Duration::from_millis)
        .map_or(default, |lease| lease.max(MIN_LEASE))
}

/// Who holds a lease: this host and process, for operators reading the lease rows.
pub(crate) fn holder_name(role: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "unknown-host".to_owned());
    format!("{role}@{host}:{}", std::process::id())
}

/// A controller's hold on its run's lease row, renewed on a thread of its own until dropped.
/// When a renewal is refused the hold is lost: every fenced append fails from then on.
pub(crate) struct ControllerHold {
    lease: ControllerLease,
    ttl: Duration,
    lost: Arc<AtomicBool>,
    stop: Option<std::sync::mpsc::Sender<()>>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

impl ControllerHold {
    /// Takes the run's controller lease; `Ok(None)` while another controller holds it.
    pub(crate) fn acquire(
        store: Arc<dyn RunStore>,
        run_id: &RunId,
    ) -> Result<Option<Self>, RuntimeError> {
        let Some(postgres) = store.as_postgres() else {
            return Err(RuntimeError::Internal(
                "controller leases need a PostgreSQL ledger".into(),
            ));
        };
        let ttl = lease_setting(CONTROLLER_LEASE_ENV, DEFAULT_CONTROLLER_LEASE);
        let Some(lease) = postgres.acquire_controller(run_id, &holder_name("controller"), ttl)?
        else {
            return Ok(None);
        };
        let held = lease.clone();
        let lost = Arc::new(AtomicBool::new(false));
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let renewer = {
            let (lease, lost) = (lease.clone(), lost.clone());
            std::thread::Builder::new()
                .name("trellis-lease".into())
                .spawn(move || renew_until_stopped(&store, lease, ttl, &lost, &stopped))
                .map_err(|e| RuntimeError::io("cannot start the lease renewal thread", e))?
        };
        Ok(Some(Self {
            lease: held,
            ttl,
            lost,
            stop: Some(stop),
            renewer: Some(renewer),
        }))
    }

    pub(crate) fn token(&self) -> i64 {
        self.lease.fencing_token
    }

    /// The ledger as this hold writes it: fenced by its token, taking the lease back when an
    /// outage outlasted it and nobody took it.
    pub(crate) fn fenced_store(&self, inner: Arc<dyn RunStore>) -> FencedStore {
        FencedStore {
            inner,
            token: self.lease.fencing_token,
            retake: Some((self.lease.clone(), self.ttl)),
        }
    }

    /// Whether a renewal was refused (another controller took the run over).
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }
}

fn renew_until_stopped(
    store: &Arc<dyn RunStore>,
    mut lease: ControllerLease,
    ttl: Duration,
    lost: &AtomicBool,
    stopped: &std::sync::mpsc::Receiver<()>,
) {
    let Some(postgres) = store.as_postgres() else {
        return;
    };
    loop {
        match stopped.recv_timeout(ttl / 3) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            // Stopped, or the hold was dropped.
            _ => return,
        }
        match postgres.renew_controller(&lease, ttl) {
            Ok(renewed) => lease = renewed,
            Err(LedgerError::Fenced { .. }) => {
                lost.store(true, Ordering::Relaxed);
                return;
            }
            // A ledger hiccup: try again at the next tick; the lease may still be live.
            Err(_) => {}
        }
    }
}

impl Drop for ControllerHold {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(renewer) = self.renewer.take() {
            let _ = renewer.join();
        }
    }
}

/// The ledger as a controller holding the run's lease writes it: every append carries the
/// lease's fencing token, so once another controller took the run over, nothing of this one
/// is stored (`lease.fenced`). Reads go straight through.
pub(crate) struct FencedStore {
    inner: Arc<dyn RunStore>,
    token: i64,
    /// The lease to take back before giving up on a fenced append (a controller's; a
    /// one-off writer such as force-stop has none).
    retake: Option<(ControllerLease, Duration)>,
}

impl FencedStore {
    pub(crate) fn new(inner: Arc<dyn RunStore>, token: i64) -> Self {
        Self {
            inner,
            token,
            retake: None,
        }
    }

    /// Runs a fenced write; refused because the lease expired during an outage while nobody
    /// took it, the lease is taken back and the write tried once more.
    fn fenced_write(
        &self,
        write: impl Fn(&PostgresStore) -> Result<Cursor, LedgerError>,
    ) -> Result<Cursor, LedgerError> {
        let postgres = self.postgres()?;
        match (write(postgres), &self.retake) {
            (Err(LedgerError::Fenced { .. }), Some((lease, ttl))) => {
                postgres.renew_controller(lease, *ttl)?;
                write(postgres)
            }
            (result, _) => result,
        }
    }

    fn postgres(&self) -> Result<&PostgresStore, LedgerError> {
        self.inner.as_postgres().ok_or_else(|| LedgerError::Fenced {
            detail: "fenced appends need a PostgreSQL ledger".into(),
        })
    }
}

impl RunStore for FencedStore {
    fn as_postgres(&self) -> Option<&PostgresStore> {
        self.inner.as_postgres()
    }

    fn create_or_get(&self, run: NewRun) -> Result<(RunRecord, Admission), LedgerError> {
        self.inner.create_or_get(run)
    }

    fn find_by_key(&self, submission_key: &str) -> Result<Option<RunRecord>, LedgerError> {
        self.inner.find_by_key(submission_key)
    }

    fn record(&self, run_id: &RunId) -> Result<RunRecord, LedgerError> {
        self.inner.record(run_id)
    }

    fn head(&self, run_id: &RunId) -> Result<RunHead, LedgerError> {
        self.inner.head(run_id)
    }

    fn snapshot(&self, run_id: &RunId) -> Result<RunSnapshot, LedgerError> {
        self.inner.snapshot(run_id)
    }

    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<ListedRun>, LedgerError> {
        self.inner.list_runs(filter)
    }

    fn append(&self, run_id: &RunId, events: &[RunEvent]) -> Result<Cursor, LedgerError> {
        self.fenced_write(|postgres| postgres.append_fenced(run_id, self.token, events))
    }

    fn append_at(
        &self,
        run_id: &RunId,
        expected: Cursor,
        events: &[RunEvent],
    ) -> Result<Cursor, LedgerError> {
        self.fenced_write(|postgres| {
            postgres.append_at_fenced(run_id, expected, self.token, events)
        })
    }

    fn events_after(
        &self,
        run_id: &RunId,
        after: Cursor,
        limit: usize,
        filter: EventFilter,
    ) -> Result<Vec<StoredEvent>, LedgerError> {
        self.inner.events_after(run_id, after, limit, filter)
    }

    fn latest_cursor(&self, run_id: &RunId) -> Result<Cursor, LedgerError> {
        self.inner.latest_cursor(run_id)
    }

    fn run_contains_bytes(&self, run_id: &RunId, needle: &[u8]) -> Result<bool, LedgerError> {
        self.inner.run_contains_bytes(run_id, needle)
    }

    fn request_force_stop(&self, run_id: &RunId) -> Result<RunHead, LedgerError> {
        self.inner.request_force_stop(run_id)
    }

    fn wait_for_change(
        &self,
        run_id: &RunId,
        after: Cursor,
        timeout: Duration,
    ) -> Result<Cursor, LedgerError> {
        self.inner.wait_for_change(run_id, after, timeout)
    }
}
