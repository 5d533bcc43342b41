//! Reading the documents a run is made of (graphs, inputs, plans, registries) from files:
//! bounded in size, strictly parsed, and classified as GraphSpec or GaP.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;
use trellis_graph::json::parse_strict;
use trellis_graph::limits::MAX_DOCUMENT_BYTES;

use crate::shared::admission_error::AdmissionError;

/// What a graph path holds.
#[derive(Debug, Clone, PartialEq)]
pub enum DocumentKind {
    /// A GraphSpec document, parsed as JSON (not yet as a graph).
    GraphSpec { path: PathBuf, value: Value },
    /// A GaP workflow: a directory with `workflow.json`, or a file with `"version": 3`.
    Gap { path: PathBuf },
    /// The file is not JSON (or nested too deeply, or has duplicate keys).
    Unparseable { path: PathBuf, error: String },
}

/// Reads and classifies `path`. A missing or unreadable file is an error; bad JSON is
/// [`DocumentKind::Unparseable`].
pub fn classify(path: &Path) -> Result<DocumentKind, AdmissionError> {
    if path.is_dir() {
        if path.join("workflow.json").is_file() {
            return Ok(DocumentKind::Gap {
                path: path.to_path_buf(),
            });
        }
        return Err(AdmissionError::Unreadable {
            what: "graph",
            path: path.to_path_buf(),
            reason: "it is a directory without workflow.json; pass a graph file or a GaP \
                     workflow directory"
                .to_owned(),
        });
    }
    let text = read_text_file(path, "graph")?;
    Ok(match parse_strict(&text) {
        Err(error) => DocumentKind::Unparseable {
            path: path.to_path_buf(),
            error: error.to_string(),
        },
        Ok(value) if trellis_gap::is_gap_document(&value) => DocumentKind::Gap {
            path: path.to_path_buf(),
        },
        Ok(value) => DocumentKind::GraphSpec {
            path: path.to_path_buf(),
            value,
        },
    })
}

/// Reads a JSON document strictly from a file of at most 16 MiB.
pub(crate) fn read_json_file(path: &Path, what: &'static str) -> Result<Value, AdmissionError> {
    let text = read_text_file(path, what)?;
    parse_strict(&text).map_err(|e| AdmissionError::Unparseable {
        what,
        path: Some(path.to_path_buf()),
        error: e.to_string(),
    })
}

/// Reads a UTF-8 text file of at most 16 MiB, refusing larger ones before reading them. A
/// device or pipe (which reports no length) is read up to one byte past the limit at most.
pub(crate) fn read_text_file(path: &Path, what: &'static str) -> Result<String, AdmissionError> {
    let unreadable = |reason: String| AdmissionError::Unreadable {
        what,
        path: path.to_path_buf(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|e| unreadable(e.to_string()))?;
    let metadata = file.metadata().map_err(|e| unreadable(e.to_string()))?;
    if metadata.is_file() && metadata.len() > MAX_DOCUMENT_BYTES as u64 {
        return Err(AdmissionError::TooLarge {
            what,
            path: path.to_path_buf(),
            bytes: Some(metadata.len()),
        });
    }
    let mut bytes = Vec::new();
    file.take(MAX_DOCUMENT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| unreadable(e.to_string()))?;
    if bytes.len() > MAX_DOCUMENT_BYTES {
        // A regular file that grew meanwhile, or a stream with no end in sight.
        return Err(AdmissionError::TooLarge {
            what,
            path: path.to_path_buf(),
            bytes: None,
        });
    }
    String::from_utf8(bytes).map_err(|e| AdmissionError::Unparseable {
        what,
        path: Some(path.to_path_buf()),
        error: format!(
            "it is not UTF-8 text (invalid bytes at offset {})",
            e.utf8_error().valid_up_to()
        ),
    })
}
