//! Locates the public conformance vectors (`../shared/conformance` beside the repository, or
//! `$TRELLIS_CONFORMANCE_DIR`) for the test suites of every crate.

use std::path::{Path, PathBuf};

/// Where the vectors are, if present. `manifest_dir` is the calling crate's
/// `CARGO_MANIFEST_DIR`; the default location is `<workspace>/../shared/conformance`.
pub fn locate(manifest_dir: &str) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("TRELLIS_CONFORMANCE_DIR") {
        let dir = PathBuf::from(dir);
        return dir.is_dir().then_some(dir);
    }
    Path::new(manifest_dir)
        .ancestors()
        .map(|a| a.join("../shared/conformance"))
        .find(|candidate| candidate.is_dir())
}

/// The vectors directory for a test: `Ok(None)` means "skip" (printed as a note), and under
/// `CI` a missing directory is an error instead, so CI can never pass by skipping.
pub fn require(manifest_dir: &str) -> Result<Option<PathBuf>, String> {
    match locate(manifest_dir) {
        Some(dir) => Ok(Some(dir)),
        None if std::env::var_os("CI").is_some() => Err(
            "conformance vectors not found under CI: set TRELLIS_CONFORMANCE_DIR or place \
             ../shared/conformance beside the repository"
                .to_owned(),
        ),
        None => {
            eprintln!(
                "note: conformance vectors not found; skipping (set TRELLIS_CONFORMANCE_DIR)"
            );
            Ok(None)
        }
    }
}

/// The `*.json` files of a folder, sorted by name.
pub fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}
