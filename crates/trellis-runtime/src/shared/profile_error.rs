//! Why a profile operation was refused: one closed error with a stable code per variant.

use std::fmt;

/// A profile's revision as a conflict names it: a number, or none (absent, or not given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shown(pub Option<u64>);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(revision) => write!(f, "revision {revision}"),
            None => f.write_str("no revision"),
        }
    }
}

/// Why a profile could not be read, saved or deleted. Messages never carry secret values
/// (plans only name variables). An admission refusal on save is not here: it is the
/// admission's own error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "{name:?} is not a profile name: {why} (1–64 characters: lowercase letters, digits, \
         '-', '_' and '.', starting with a letter or digit)"
    )]
    InvalidName { name: String, why: String },
    #[error("no profile named {0} (`trellis profile list` shows them)")]
    NotFound(String),
    /// The profile changed since the caller read it (or exists when it was to be created, or
    /// is gone when it was to be replaced).
    #[error(
        "profile {name} is at {}, but this change names {}: {}",
        Shown(*current), Shown(*expected), conflict_hint(*current, *expected)
    )]
    RevisionConflict {
        name: String,
        /// `None`: the profile does not exist.
        current: Option<u64>,
        /// `None`: the change named no revision.
        expected: Option<u64>,
    },
    #[error("the profile is not valid: {0}")]
    Invalid(String),
    #[error("profile {name} is damaged and cannot be read: {reason}")]
    Unreadable { name: String, reason: String },
    #[error("the profile store {context}: {reason}")]
    Io { context: String, reason: String },
}

fn conflict_hint(current: Option<u64>, expected: Option<u64>) -> String {
    match (current, expected) {
        (Some(current), None) => format!(
            "it already exists; replace it with --revision {current} after reading it \
             (`trellis profile show`), or --force"
        ),
        (Some(current), Some(_)) => format!(
            "someone changed it since you read it; read it again and save with \
             --revision {current}, or --force"
        ),
        (None, _) => "it does not exist (deleted meanwhile?); save it without --revision to \
                      create it"
            .to_owned(),
    }
}

impl ProfileError {
    /// A stable, machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidName { .. } => "profile.invalid_name",
            Self::NotFound(_) => "profile.not_found",
            Self::RevisionConflict { .. } => "profile.revision_conflict",
            Self::Invalid(_) => "profile.invalid",
            Self::Unreadable { .. } => "profile.unreadable",
            Self::Io { .. } => "profile.io",
        }
    }

    pub(crate) fn io(context: impl Into<String>, error: &std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            reason: error.to_string(),
        }
    }
}
