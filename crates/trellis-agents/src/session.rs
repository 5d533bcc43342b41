//! Agent sessions that outlive one execution (`sessionScope: node_instance`): which provider
//! session a node instance continues, where its private home is, and what usage its CLI last
//! reported.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::harness::TokenUsage;

/// Identifies a node instance within a run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    pub run_id: String,
    pub node: String,
    pub node_instance: u64,
}

/// A provider session kept for the next execution of the same node instance.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    /// The CLI's session or thread id, used to resume.
    pub id: String,
    /// The private home the session's transcript lives in (`None` on native lanes, whose CLI
    /// keeps its state in the user's real home).
    pub home: Option<PathBuf>,
    /// The CLI's last running usage total for this session, for CLIs that report usage
    /// cumulatively (Codex, Copilot); zero otherwise.
    pub reported_total: TokenUsage,
}

/// What a new execution of a node instance starts from.
#[derive(Debug, Clone, PartialEq)]
pub enum Checkout {
    Fresh,
    Resume(SessionRecord),
}

/// Sessions by node instance, shared by every execution a harness runs.
#[derive(Debug, Default)]
pub struct SessionStore {
    slots: Mutex<HashMap<SessionKey, SessionRecord>>,
}

impl SessionStore {
    pub fn checkout(&self, key: &SessionKey) -> Checkout {
        match self.lock().get(key) {
            None => Checkout::Fresh,
            Some(record) => Checkout::Resume(record.clone()),
        }
    }

    /// Keeps `record` for the next execution of `key`.
    pub fn keep(&self, key: SessionKey, record: SessionRecord) {
        self.lock().insert(key, record);
    }

    /// Drops the session of `key`: the next execution of that node instance starts a fresh
    /// one (the reference does the same after a crash, a timeout or a refusal).
    pub fn forget(&self, key: &SessionKey) {
        self.lock().remove(key);
    }

    /// Forgets every session of `run_id`; returns the private homes they used.
    pub fn close_run(&self, run_id: &str) -> Vec<PathBuf> {
        let mut slots = self.lock();
        let mut homes = Vec::new();
        slots.retain(|key, record| {
            if key.run_id != run_id {
                return true;
            }
            if let Some(home) = &record.home {
                homes.push(home.clone());
            }
            false
        });
        homes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionKey, SessionRecord>> {
        // The map holds plain data; a panic elsewhere cannot leave it half-updated.
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(run: &str, instance: u64) -> SessionKey {
        SessionKey {
            run_id: run.into(),
            node: "n".into(),
            node_instance: instance,
        }
    }

    #[test]
    fn sessions_resume_until_forgotten_and_close_with_their_run() {
        let store = SessionStore::default();
        assert_eq!(store.checkout(&key("r", 1)), Checkout::Fresh);
        let record = SessionRecord {
            id: "s1".into(),
            home: Some("/h/1".into()),
            reported_total: TokenUsage::default(),
        };
        store.keep(key("r", 1), record.clone());
        store.keep(
            key("other", 1),
            SessionRecord {
                id: "s2".into(),
                home: Some("/h/2".into()),
                reported_total: TokenUsage::default(),
            },
        );
        assert_eq!(store.checkout(&key("r", 1)), Checkout::Resume(record));
        assert_eq!(store.checkout(&key("r", 2)), Checkout::Fresh);
        store.keep(
            key("r", 2),
            SessionRecord {
                id: "s3".into(),
                home: None,
                reported_total: TokenUsage::default(),
            },
        );
        store.forget(&key("r", 2));
        assert_eq!(store.checkout(&key("r", 2)), Checkout::Fresh);
        assert_eq!(store.close_run("r"), vec![PathBuf::from("/h/1")]);
        assert_eq!(store.checkout(&key("r", 1)), Checkout::Fresh);
        assert!(matches!(
            store.checkout(&key("other", 1)),
            Checkout::Resume(_)
        ));
    }
}
