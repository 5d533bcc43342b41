//! Run identity: the id every run is known by.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Longest run id in bytes.
pub const MAX_RUN_ID_BYTES: usize = 64;

/// A run id: 1..=64 ASCII letters, digits, `-`, `_` or `.`, starting with a letter or digit.
///
/// The CLI assigns UUIDv7 strings ([`RunId::generate`]); the narrow charset keeps run ids safe
/// to print, to use as file names and to quote in error messages.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId(String);

impl RunId {
    /// Validates `text` as a run id.
    pub fn new(text: &str) -> Result<Self, String> {
        if text.is_empty() || text.len() > MAX_RUN_ID_BYTES {
            return Err(format!("run id must be 1..={MAX_RUN_ID_BYTES} bytes"));
        }
        let mut bytes = text.bytes();
        let first_ok = bytes.next().is_some_and(|b| b.is_ascii_alphanumeric());
        let rest_ok = bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !(first_ok && rest_ok) {
            return Err(
                "run id must start with a letter or digit and use only letters, digits, '-', '_' and '.'"
                    .to_owned(),
            );
        }
        Ok(Self(text.to_owned()))
    }

    /// A fresh UUIDv7 run id (time-ordered, canonical hyphenated lowercase form).
    pub fn generate() -> Self {
        Self(uuid::Uuid::now_v7().hyphenated().to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for RunId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for RunId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::new(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_accept_uuids_and_reject_unsafe_text() {
        assert!(RunId::new("0190a6f2-7b3c-7def-8abc-0123456789ab").is_ok());
        assert!(RunId::new("run-1").is_ok());
        for bad in ["", "-run", "run/1", "run 1", "ru\nn", &"a".repeat(65)] {
            assert!(RunId::new(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn generated_run_ids_are_uuid_v7() {
        let id = RunId::generate();
        let parsed = uuid::Uuid::parse_str(id.as_str()).unwrap();
        assert_eq!(parsed.get_version_num(), 7);
        assert_eq!(id.as_str().len(), 36);
        assert!(RunId::new(id.as_str()).is_ok());
    }
}
