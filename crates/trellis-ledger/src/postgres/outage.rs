//! Riding out a ledger server outage: a call that finds the server unreachable is repeated,
//! with growing pauses, until the store's outage window closes. An append whose connection
//! broke may have committed: before it is sent again, the run's latest events are read and a
//! batch found there is taken as stored, so an outage never stores a batch twice.

use std::time::{Duration, Instant};

use crate::cursor::Cursor;
use crate::error::LedgerError;
use crate::event::{EventFilter, RunEvent};
use crate::ids::RunId;
use crate::postgres::error::is_outage;
use crate::postgres::{PostgresStore, runs};

/// The first pause after a failed attempt; each later one doubles, up to [`LONGEST_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const LONGEST_PAUSE: Duration = Duration::from_secs(1);
/// How far back from the run's latest event a plain append (one without an expected cursor)
/// is looked for: other writers of the run may have appended after it.
const LANDED_SEARCH_EVENTS: u64 = 256;

impl PostgresStore {
    /// Calls `attempt` until it succeeds, fails with something other than an outage, or the
    /// outage window has passed (then its last error is returned).
    pub(super) fn riding_out<T>(
        &self,
        mut attempt: impl FnMut() -> Result<T, LedgerError>,
    ) -> Result<T, LedgerError> {
        let started = Instant::now();
        let mut pause = FIRST_PAUSE;
        loop {
            match attempt() {
                Err(error)
                    if is_outage(&error) && started.elapsed() + pause < self.outage_window =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(LONGEST_PAUSE);
                }
                other => return other,
            }
        }
    }

    /// Appends `batch`, riding out an outage: once an attempt failed in a way that may have
    /// committed it, every later attempt first looks for it in the ledger.
    pub(super) fn append_riding_out(
        &self,
        run_id: &RunId,
        expected: Option<Cursor>,
        batch: &[(RunEvent, String)],
        mut append: impl FnMut(Vec<(RunEvent, String)>) -> Result<Cursor, LedgerError>,
    ) -> Result<Cursor, LedgerError> {
        let mut may_have_landed = false;
        self.riding_out(|| {
            if may_have_landed && let Some(cursor) = self.landed(run_id, expected, batch)? {
                return Ok(cursor);
            }
            let result = append(batch.to_vec());
            if result.as_ref().is_err_and(is_outage) {
                may_have_landed = true;
            }
            result
        })
    }

    /// The cursor of `batch` if it is already stored: right after `expected` when one was
    /// given, else as the latest run of equal events among the run's last ones.
    fn landed(
        &self,
        run_id: &RunId,
        expected: Option<Cursor>,
        batch: &[(RunEvent, String)],
    ) -> Result<Option<Cursor>, LedgerError> {
        let wanted: Vec<&RunEvent> = batch.iter().map(|(event, _)| event).collect();
        let count = wanted.len() as u64;
        if count == 0 {
            return Ok(None);
        }
        let latest = self.latest_cursor_once(run_id)?;
        let from = match expected {
            Some(expected) if latest.sequence() < expected.sequence() + count => return Ok(None),
            Some(expected) => expected.sequence(),
            None => latest
                .sequence()
                .saturating_sub(count + LANDED_SEARCH_EVENTS),
        };
        let limit = usize::try_from(latest.sequence() - from).unwrap_or(usize::MAX);
        let after = Cursor::at(from).map_err(|_| LedgerError::InvalidCursor)?;
        let run = run_id.clone();
        let stored = self.call(move |shared| async move {
            runs::events_after(&shared, &run, after, limit, EventFilter::All).await
        })?;
        let found = stored
            .windows(wanted.len())
            .rev()
            .find(|window| window.iter().map(|s| &s.event).eq(wanted.iter().copied()))
            .filter(|window| expected.is_none() || window[0].cursor.sequence() == from + 1);
        Ok(found.and_then(|window| window.last().map(|last| last.cursor)))
    }

    pub(super) fn latest_cursor_once(&self, run_id: &RunId) -> Result<Cursor, LedgerError> {
        let run = run_id.clone();
        self.call(move |shared| async move { runs::latest_cursor(&shared, &run).await })
    }
}
