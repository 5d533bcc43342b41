//! A run row as a backend read it, before its values are checked, and the conversions every
//! backend shares: stored integers, run ids, kinds, progress and the admission record.

use std::borrow::Cow;

use serde_json::Value;

use crate::admission::RunRecord;
use crate::cursor::Cursor;
use crate::error::LedgerError;
use crate::event::{RunEvent, StoredEvent};
use crate::ids::{RunId, RunKind};
use crate::limits::{MAX_EVENT_JSON_BYTES, MAX_EVENTS_PER_APPEND};
use crate::snapshot::{ExecutionSnapshot, RunHead, RunProgress};

/// A run's immutable row joined with its mutable head, as stored.
#[derive(Debug, Default)]
pub(crate) struct StoredRun {
    /// The backend's row id of the run.
    pub(crate) id: i64,
    pub(crate) run_id: String,
    pub(crate) submission_key: String,
    pub(crate) submission_digest: String,
    pub(crate) kind: String,
    pub(crate) title: String,
    pub(crate) graph_identity: Option<String>,
    pub(crate) predecessor: Option<String>,
    pub(crate) successor: Option<String>,
    pub(crate) created_at_ms: i64,
    pub(crate) cursor: i64,
    pub(crate) progress_json: String,
}

impl StoredRun {
    pub(crate) fn kind(&self) -> Result<RunKind, LedgerError> {
        parse_kind(&self.kind)
    }

    pub(crate) fn cursor(&self) -> Result<Cursor, LedgerError> {
        stored_cursor(self.cursor)
    }

    pub(crate) fn progress(&self) -> Result<RunProgress, LedgerError> {
        serde_json::from_str(&self.progress_json).map_err(|_| {
            LedgerError::corrupt(format!("stored progress of run {} is invalid", self.run_id))
        })
    }

    /// The admission record, given the stored submission text (`None`: a null submission,
    /// for callers that only need the head).
    pub(crate) fn record(&self, submission_json: Option<&str>) -> Result<RunRecord, LedgerError> {
        let run_id = stored_run_id(&self.run_id)?;
        let submission = match submission_json {
            Some(text) => serde_json::from_str(text).map_err(|_| {
                LedgerError::corrupt(format!("stored submission of run {run_id} is invalid"))
            })?,
            None => Value::Null,
        };
        Ok(RunRecord {
            submission_key: self.submission_key.clone(),
            submission_digest: self.submission_digest.clone(),
            title: self.title.clone(),
            kind: self.kind()?,
            graph_identity: self.graph_identity.clone(),
            submission,
            predecessor: self.predecessor.as_deref().map(stored_run_id).transpose()?,
            successor: self.successor.as_deref().map(stored_run_id).transpose()?,
            created_at_ms: to_u64(self.created_at_ms)?,
            run_id,
        })
    }

    pub(crate) fn head(&self) -> Result<RunHead, LedgerError> {
        Ok(RunHead::new(
            &self.record(None)?,
            self.cursor()?,
            self.progress()?,
        ))
    }
}

pub(crate) fn parse_kind(text: &str) -> Result<RunKind, LedgerError> {
    RunKind::parse(text).ok_or_else(|| LedgerError::corrupt("a stored run kind is unknown"))
}

pub(crate) fn stored_run_id(text: &str) -> Result<RunId, LedgerError> {
    RunId::new(text).map_err(|_| LedgerError::corrupt("a stored run id is invalid"))
}

pub(crate) fn stored_cursor(sequence: i64) -> Result<Cursor, LedgerError> {
    Ok(Cursor::at(to_u64(sequence)?)?)
}

/// An execution snapshot from its stored JSON text.
pub(crate) fn parse_execution(
    run_id: &RunId,
    execution: u64,
    text: &str,
) -> Result<ExecutionSnapshot, LedgerError> {
    serde_json::from_str(text).map_err(|_| {
        LedgerError::corrupt(format!(
            "stored execution {execution} of run {run_id} is invalid"
        ))
    })
}

/// An event from its stored row.
pub(crate) fn parse_event(
    run_id: &RunId,
    sequence: i64,
    recorded_at_ms: i64,
    text: &str,
) -> Result<StoredEvent, LedgerError> {
    let event: RunEvent = serde_json::from_str(text).map_err(|_| {
        LedgerError::corrupt(format!(
            "stored event {sequence} of run {run_id} is invalid"
        ))
    })?;
    Ok(StoredEvent {
        cursor: stored_cursor(sequence)?,
        recorded_at_ms: to_u64(recorded_at_ms)?,
        event,
    })
}

/// A batch as stored: each event normalized (see [`RunEvent::normalized`]) with its JSON
/// text, after checking the batch and event size bounds.
pub(crate) fn prepare_batch(
    events: &[RunEvent],
) -> Result<Vec<(Cow<'_, RunEvent>, String)>, LedgerError> {
    if events.len() > MAX_EVENTS_PER_APPEND {
        return Err(LedgerError::InvalidEvent {
            index: MAX_EVENTS_PER_APPEND,
            reason: format!("one append carries at most {MAX_EVENTS_PER_APPEND} events"),
        });
    }
    let mut prepared = Vec::with_capacity(events.len());
    for (index, event) in events.iter().enumerate() {
        let event = event.normalized();
        let text = serde_json::to_string(&event).map_err(|_| LedgerError::InvalidEvent {
            index,
            reason: "the event is not serializable".to_owned(),
        })?;
        if text.len() > MAX_EVENT_JSON_BYTES {
            return Err(LedgerError::InvalidEvent {
                index,
                reason: format!("an event is at most {MAX_EVENT_JSON_BYTES} bytes of JSON"),
            });
        }
        prepared.push((event, text));
    }
    Ok(prepared)
}

/// JSON text of a value the ledger itself built (progress, snapshots), which always serializes.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn to_json_text(
    value: &impl serde::Serialize,
    what: &str,
) -> Result<String, LedgerError> {
    serde_json::to_string(value).map_err(|_| LedgerError::Internal {
        detail: format!("{what} is not serializable"),
    })
}

pub(crate) fn to_u64(value: i64) -> Result<u64, LedgerError> {
    u64::try_from(value).map_err(|_| LedgerError::corrupt("a stored counter is negative"))
}

pub(crate) fn to_i64(value: u64) -> Result<i64, LedgerError> {
    i64::try_from(value).map_err(|_| LedgerError::Internal {
        detail: "a counter exceeds the storable range".to_owned(),
    })
}
