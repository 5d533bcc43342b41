//! Opaque event cursors: `c1:<sequence>`, where `c1:0` is "before every event".

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Largest sequence number a cursor may name (SQLite integers are signed 64-bit).
pub const MAX_SEQUENCE: u64 = i64::MAX as u64;

/// Text that is not a cursor this ledger handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid cursor: expected an opaque cursor previously returned by the ledger")]
pub struct CursorError;

const PREFIX: &str = "c1:";

/// A position in one run's event sequence. Clients treat the text as opaque; a cursor names
/// the last event already seen, so reading "after" it is exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Cursor(u64);

impl Cursor {
    /// Before every event of a run.
    pub const START: Cursor = Cursor(0);

    /// The cursor of the event with this sequence number.
    pub fn at(sequence: u64) -> Result<Self, CursorError> {
        if sequence > MAX_SEQUENCE {
            return Err(CursorError);
        }
        Ok(Self(sequence))
    }

    /// Parses the text form; anything but `c1:` followed by a canonical decimal is malformed.
    pub fn parse(text: &str) -> Result<Self, CursorError> {
        let digits = text.strip_prefix(PREFIX).ok_or(CursorError)?;
        let canonical = !digits.is_empty()
            && digits.len() <= 19
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        if !canonical {
            return Err(CursorError);
        }
        let sequence: u64 = digits.parse().map_err(|_| CursorError)?;
        Self::at(sequence)
    }

    /// The sequence number of the last event this cursor covers (0 for [`Cursor::START`]).
    pub fn sequence(self) -> u64 {
        self.0
    }

    /// The cursor of the following event.
    pub fn next(self) -> Result<Self, CursorError> {
        Self::at(self.0.saturating_add(1))
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", self.0)
    }
}

impl std::str::FromStr for Cursor {
    type Err = CursorError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl Serialize for Cursor {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Cursor {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_through_text() {
        for sequence in [0, 1, 17, MAX_SEQUENCE] {
            let cursor = Cursor::at(sequence).unwrap();
            assert_eq!(Cursor::parse(&cursor.to_string()).unwrap(), cursor);
        }
        assert_eq!(Cursor::START.to_string(), "c1:0");
        assert_eq!(Cursor::parse("c1:42").unwrap().sequence(), 42);
    }

    #[test]
    fn malformed_cursors_are_rejected() {
        for bad in [
            "",
            "c1:",
            "c1:-1",
            "c1:01",
            "c1:1.0",
            "c1: 1",
            "v2:7",
            "c2:7",
            "7",
            "c1:1a",
            "c1:9223372036854775808",
            "c1:99999999999999999999",
        ] {
            assert_eq!(Cursor::parse(bad), Err(CursorError), "{bad:?}");
        }
    }
}
