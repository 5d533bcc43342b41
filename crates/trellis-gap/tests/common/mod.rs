//! Shared helpers for the integration tests: conformance lookup and scratch workflow directories.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use trellis_gap::Workflow;

/// `$TRELLIS_CONFORMANCE_DIR/gap`, else `../shared/conformance/gap` from the workspace root.
///
/// Missing directory: panics when `CI` is set, otherwise prints a note and returns `None`.
pub fn conformance_gap_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("TRELLIS_CONFORMANCE_DIR") {
        Some(root) => PathBuf::from(root).join("gap"),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/gap"),
    };
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "conformance directory {} is missing (CI is set)",
            dir.display()
        );
    }
    eprintln!(
        "note: skipping, conformance directory {} not found",
        dir.display()
    );
    None
}

/// Reads a conformance document as JSON.
pub fn conformance_json(dir: &Path, name: &str) -> Value {
    let text = std::fs::read_to_string(dir.join(name)).expect("read conformance file");
    serde_json::from_str(&text).expect("conformance file is JSON")
}

/// The crate's test fixture directory.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A scratch workflow directory: `workflow.json` from `document` plus the fixture scripts.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new(document: &Value) -> Scratch {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("workflow.json"),
            serde_json::to_string_pretty(document).unwrap(),
        )
        .unwrap();
        let scripts = dir.path().join("scripts");
        std::fs::create_dir_all(&scripts).unwrap();
        for entry in std::fs::read_dir(fixtures().join("scripts")).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), scripts.join(entry.file_name())).unwrap();
        }
        Scratch { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn load(&self) -> Workflow {
        trellis_gap::load_workflow(self.path()).expect("scratch workflow loads")
    }
}

/// (severity, location, rule) triples of a list of issues, for exact comparisons.
pub fn shape(issues: &[trellis_gap::Issue]) -> Vec<(String, String, Option<String>)> {
    issues
        .iter()
        .map(|i| {
            (
                i.severity.as_str().to_string(),
                i.node_id.clone(),
                i.rule().map(str::to_string),
            )
        })
        .collect()
}

pub fn triple(
    severity: &str,
    location: &str,
    rule: Option<&str>,
) -> (String, String, Option<String>) {
    (
        severity.to_string(),
        location.to_string(),
        rule.map(str::to_string),
    )
}
