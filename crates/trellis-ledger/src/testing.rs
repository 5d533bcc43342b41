//! Helpers other crates' tests use to check what the ledger holds.

use crate::error::LedgerError;
use crate::ids::RunId;
use crate::store::RunStore;

/// Whether `needle` occurs anywhere in what `store` keeps for `run_id`: its submission, every
/// event and its snapshot. Canary tests plant a secret in the environment, run, and assert
/// this is `false`. Stored text is JSON, so the needle's JSON-escaped form is searched too.
pub fn scan_for(store: &dyn RunStore, run_id: &RunId, needle: &str) -> Result<bool, LedgerError> {
    if store.run_contains_bytes(run_id, needle.as_bytes())? {
        return Ok(true);
    }
    let quoted = serde_json::Value::String(needle.to_owned()).to_string();
    let escaped = &quoted[1..quoted.len() - 1];
    Ok(escaped != needle && store.run_contains_bytes(run_id, escaped.as_bytes())?)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{NewRun, RunKind, SqliteStore};

    #[test]
    fn needles_with_json_special_characters_are_found_in_their_escaped_form() {
        let store = SqliteStore::open_in_memory().unwrap();
        let run_id = RunId::new("run-1").unwrap();
        let submission = json!({"token": "sk-\"quoted\"\\path"});
        let run = NewRun::new(run_id.clone(), "k", "t", RunKind::Graphspec, submission);
        store.create_or_get(run).unwrap();
        assert!(scan_for(&store, &run_id, "sk-\"quoted\"\\path").unwrap());
        assert!(!scan_for(&store, &run_id, "sk-\"other").unwrap());
    }

    #[test]
    fn stores_are_shareable_trait_objects() {
        fn shareable<T: Send + Sync + ?Sized>() {}
        shareable::<dyn RunStore>();
        shareable::<SqliteStore>();
    }
}
