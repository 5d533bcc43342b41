//! The JSON fast path: [`parse`] reads a document's text into a [`Json`] tree exactly as
//! serde_json reads it — the same values, and the same refusals with serde's own messages —
//! but with its arrays and objects in a bump [`Arena`] and its strings borrowed from the text,
//! so a large graph costs a few arena chunks instead of an allocation per value. [`parallel`]
//! holds the two-thread helpers the typed readers and the verifier share.
//!
//! Ordinary documents are read by a single-pass scanner (on two threads from 256 KiB on, when a
//! second CPU is available); anything it does not handle itself — every invalid document, a
//! repeated key, deep nesting, a lone surrogate, an unusual number — is parsed by serde_json
//! instead, so errors and edge cases are serde's. One deliberate difference from
//! `serde_json::Value`: a repeated object key is refused, not overwritten.

#![forbid(unsafe_code)]

mod handover;
pub mod parallel;
mod scan;
mod scan_split;
mod tree;

use serde::de::DeserializeSeed;

pub use tree::{Arena, Json, JsonObject};

/// Deepest nesting of arrays and objects a document may have (serde_json's recursion limit of
/// 128 refuses the 128th level).
pub const MAX_NESTING: usize = 127;

/// Why a document was refused. Both variants display serde_json's own message for the text,
/// which ends with the line and column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    /// Arrays and objects nested deeper than [`MAX_NESTING`].
    #[error("recursion limit exceeded at line {line} column {column}")]
    TooDeep { line: usize, column: usize },
    /// Not JSON, a repeated object key, trailing text or a number out of range.
    #[error("{message}")]
    Invalid {
        message: String,
        line: usize,
        column: usize,
    },
}

impl JsonError {
    fn from_serde(error: serde_json::Error) -> Self {
        let (line, column) = (error.line(), error.column());
        let message = error.to_string();
        if message.starts_with("recursion limit exceeded") {
            Self::TooDeep { line, column }
        } else {
            Self::Invalid {
                message,
                line,
                column,
            }
        }
    }

    /// Line of the refusal, counted from 1.
    pub fn line(&self) -> usize {
        match self {
            Self::TooDeep { line, .. } | Self::Invalid { line, .. } => *line,
        }
    }

    /// Column of the refusal, counted from 1.
    pub fn column(&self) -> usize {
        match self {
            Self::TooDeep { column, .. } | Self::Invalid { column, .. } => *column,
        }
    }
}

/// Parses one JSON document (surrounding whitespace allowed) into a tree living in `arena`
/// and borrowing from `text`: the tree serde_json would build, or serde_json's refusal.
pub fn parse<'a>(text: &'a str, arena: &'a mut Arena) -> Result<Json<'a>, JsonError> {
    let (first, second) = arena.halves();
    if let Some(tree) = scan_split::scan(text, first, second) {
        return Ok(tree);
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    tree::TreeSeed(first)
        .deserialize(&mut deserializer)
        .and_then(|tree| deserializer.end().map(|()| tree))
        .map_err(JsonError::from_serde)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_carry_serdes_message_and_position() {
        let mut arena = Arena::new();
        let error = parse("{\"a\":1,\n\"a\":2}", &mut arena).unwrap_err();
        assert_eq!(error.to_string(), "duplicate field `a` at line 2 column 6");
        assert_eq!((error.line(), error.column()), (2, 6));
        let deep = format!(
            "{}{}",
            "[".repeat(MAX_NESTING + 1),
            "]".repeat(MAX_NESTING + 1)
        );
        let mut arena = Arena::new();
        let error = parse(&deep, &mut arena).unwrap_err();
        let serde = serde_json::from_str::<serde_json::Value>(&deep).unwrap_err();
        assert!(matches!(error, JsonError::TooDeep { .. }), "{error:?}");
        assert_eq!(error.to_string(), serde.to_string());
        let mut arena = Arena::new();
        let fits = format!("{}{}", "[".repeat(MAX_NESTING), "]".repeat(MAX_NESTING));
        assert!(parse(&fits, &mut arena).is_ok());
    }
}
