//! The admission types: a run to admit ([`NewRun`], with its digest and bounds), the record
//! it becomes ([`RunRecord`]) and whether admitting created it ([`Admission`]).

use serde::Serialize;
use serde_json::{Value, json};

use crate::canonical::canonical_digest;
use crate::clock::now_ms;
use crate::error::LedgerError;
use crate::ids::{RunId, RunKind};
use crate::limits::{
    MAX_GRAPH_IDENTITY_BYTES, MAX_SUBMISSION_JSON_BYTES, MAX_SUBMISSION_KEY_BYTES, MAX_TITLE_CHARS,
};

/// A run to admit. `submission` holds the graph, input, plan, working directory and whatever
/// else defines the run — never a secret value.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    pub run_id: RunId,
    pub submission_key: String,
    /// Lowercase hex SHA-256 identifying the submission; [`NewRun::new`] computes it with
    /// [`NewRun::compute_digest`], callers with their own canonical form may set it directly.
    pub submission_digest: String,
    pub title: String,
    pub kind: RunKind,
    pub graph_identity: Option<String>,
    pub submission: Value,
    /// The run this one resumes, which must be finished and have no other successor.
    pub predecessor: Option<RunId>,
    pub created_at_ms: u64,
}

impl NewRun {
    /// A run created now, with its digest computed from the submission.
    pub fn new(
        run_id: RunId,
        submission_key: impl Into<String>,
        title: impl Into<String>,
        kind: RunKind,
        submission: Value,
    ) -> Self {
        let mut run = Self {
            run_id,
            submission_key: submission_key.into(),
            submission_digest: String::new(),
            title: title.into(),
            kind,
            graph_identity: None,
            submission,
            predecessor: None,
            created_at_ms: now_ms(),
        };
        run.submission_digest = run.compute_digest();
        run
    }

    pub fn with_graph_identity(mut self, identity: impl Into<String>) -> Self {
        self.graph_identity = Some(identity.into());
        self.submission_digest = self.compute_digest();
        self
    }

    pub fn with_predecessor(mut self, predecessor: RunId) -> Self {
        self.predecessor = Some(predecessor);
        self.submission_digest = self.compute_digest();
        self
    }

    pub fn with_created_at_ms(mut self, created_at_ms: u64) -> Self {
        self.created_at_ms = created_at_ms;
        self
    }

    /// SHA-256 over the canonical JSON of everything that defines the submission: key, title,
    /// kind, graph identity, predecessor and submission. The run id and creation time are left
    /// out, so a retry with a fresh run id is recognised as the same submission.
    pub fn compute_digest(&self) -> String {
        canonical_digest(&json!({
            "submissionKey": self.submission_key,
            "title": self.title,
            "kind": self.kind.as_str(),
            "graphIdentity": self.graph_identity,
            "predecessor": self.predecessor.as_ref().map(RunId::as_str),
            "submission": self.submission,
        }))
    }

    /// Checks every bound and returns the submission's JSON text.
    pub fn validate(&self) -> Result<String, LedgerError> {
        let printable = |text: &str| !text.chars().any(char::is_control);
        let title_chars = self.title.chars().count();
        if title_chars == 0 || title_chars > MAX_TITLE_CHARS || !printable(&self.title) {
            return Err(LedgerError::invalid_run(format!(
                "title must be 1..={MAX_TITLE_CHARS} characters without control characters"
            )));
        }
        let key = &self.submission_key;
        if key.is_empty() || key.len() > MAX_SUBMISSION_KEY_BYTES || !printable(key) {
            return Err(LedgerError::invalid_run(format!(
                "submission key must be 1..={MAX_SUBMISSION_KEY_BYTES} bytes without control characters"
            )));
        }
        let digest = &self.submission_digest;
        if digest.len() != 64
            || !digest
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(LedgerError::invalid_run(
                "submission digest must be 64 lowercase hex digits",
            ));
        }
        if let Some(identity) = &self.graph_identity
            && (identity.is_empty()
                || identity.len() > MAX_GRAPH_IDENTITY_BYTES
                || !identity.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err(LedgerError::invalid_run(format!(
                "graph identity must be 1..={MAX_GRAPH_IDENTITY_BYTES} printable ASCII bytes"
            )));
        }
        if self.predecessor.as_ref() == Some(&self.run_id) {
            return Err(LedgerError::invalid_run(
                "a run cannot be its own predecessor",
            ));
        }
        let text = serde_json::to_string(&self.submission)
            .map_err(|_| LedgerError::invalid_run("submission is not serializable"))?;
        if text.len() > MAX_SUBMISSION_JSON_BYTES {
            return Err(LedgerError::invalid_run(format!(
                "submission exceeds {MAX_SUBMISSION_JSON_BYTES} bytes"
            )));
        }
        Ok(text)
    }
}

/// A run as admitted, plus its current successor.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub run_id: RunId,
    pub submission_key: String,
    pub submission_digest: String,
    pub title: String,
    pub kind: RunKind,
    pub graph_identity: Option<String>,
    pub submission: Value,
    pub predecessor: Option<RunId>,
    /// The run that resumed this one, once there is one.
    pub successor: Option<RunId>,
    pub created_at_ms: u64,
}

/// Whether `create_or_get` admitted a new run or found the submission already admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Created,
    Existing,
}
