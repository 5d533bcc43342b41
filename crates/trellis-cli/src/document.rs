//! Recognizes what a path holds: a GraphSpec document, or a GaP workflow (a directory with
//! `workflow.json`, or a file with `"version": 3`).

use std::path::{Path, PathBuf};

use serde_json::Value;
use trellis_graph::json::parse_strict;

use crate::context::read_text_file;

/// A graph document, classified.
pub enum Document {
    GraphSpec {
        path: PathBuf,
        value: Value,
    },
    Gap {
        path: PathBuf,
    },
    /// The file is not JSON (or too large, or nested too deeply).
    Unparseable {
        path: PathBuf,
        error: String,
    },
}

/// Reads and classifies `path`. Missing files are errors; bad JSON is `Unparseable`.
pub fn classify(path: &Path) -> anyhow::Result<Document> {
    if path.is_dir() {
        if path.join("workflow.json").is_file() {
            return Ok(Document::Gap {
                path: path.to_path_buf(),
            });
        }
        anyhow::bail!(
            "{} is a directory without workflow.json; pass a graph file or a GaP workflow directory",
            path.display()
        );
    }
    let text = read_text_file(path, "graph")?;
    match parse_strict(&text) {
        Err(error) => Ok(Document::Unparseable {
            path: path.to_path_buf(),
            error: error.to_string(),
        }),
        Ok(value) if trellis_gap::is_gap_document(&value) => Ok(Document::Gap {
            path: path.to_path_buf(),
        }),
        Ok(value) => Ok(Document::GraphSpec {
            path: path.to_path_buf(),
            value,
        }),
    }
}
