//! The worker registry port (exact-reference resolution) and a registry read from a JSON file.

use std::collections::{BTreeMap, BTreeSet};

use crate::ident::WorkerRef;
use crate::json::Json;
use crate::json::{At, Obj, ParseError, array_of};
use crate::worker::WorkerDescriptor;

/// Why a worker reference did not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("worker descriptor not found: {0}")]
    NotFound(WorkerRef),
    #[error("worker descriptor version is unavailable: {0}")]
    VersionUnavailable(WorkerRef),
}

/// Resolves exact worker references to descriptors; there is no "latest version" lookup.
/// Returned descriptors may be invalid: callers validate them.
pub trait WorkerRegistry {
    fn resolve(&self, worker: &WorkerRef) -> Result<WorkerDescriptor, RegistryError>;

    /// Whether callers validate the descriptors this registry returns; `false` only for a
    /// registry synthesized from the graph's own declarations, which vouches for nothing.
    fn validates_descriptors(&self) -> bool {
        true
    }
}

/// A registry held in memory, typically read from a `--registry` file of the shape
/// `{"entries":[{"requested","descriptor"}],"versionUnavailable":[...]}`.
#[derive(Debug, Clone, Default)]
pub struct StaticRegistry {
    entries: BTreeMap<WorkerRef, WorkerDescriptor>,
    version_unavailable: BTreeSet<WorkerRef>,
}

impl StaticRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `descriptor` (kept as given, unvalidated) under the requested reference.
    pub fn insert(&mut self, requested: WorkerRef, descriptor: WorkerDescriptor) {
        self.entries.insert(requested, descriptor);
    }

    pub fn mark_version_unavailable(&mut self, requested: WorkerRef) {
        self.version_unavailable.insert(requested);
    }

    /// Parses a registry file. An `about` string is allowed for documentation.
    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = Obj::closed(
            value,
            at,
            "WorkerRegistryFile",
            &["about", "entries", "versionUnavailable"],
        )?;
        let mut registry = Self::new();
        let entries = array_of(
            obj.required("entries")?,
            &obj.path("entries"),
            |entry, entry_at| {
                let entry = Obj::closed(
                    entry,
                    entry_at,
                    "RegistryEntry",
                    &["requested", "descriptor"],
                )?;
                let requested =
                    WorkerRef::read(entry.required("requested")?, &entry.path("requested"))?;
                let descriptor = WorkerDescriptor::read_unvalidated(
                    entry.required("descriptor")?,
                    &entry.path("descriptor"),
                )?;
                Ok((requested, descriptor))
            },
        )?;
        for (requested, descriptor) in entries {
            registry.insert(requested, descriptor);
        }
        if let Some(list) = obj.optional("versionUnavailable") {
            for r in array_of(list, &obj.path("versionUnavailable"), WorkerRef::read)? {
                registry.mark_version_unavailable(r);
            }
        }
        Ok(registry)
    }
}

impl WorkerRegistry for StaticRegistry {
    fn resolve(&self, worker: &WorkerRef) -> Result<WorkerDescriptor, RegistryError> {
        if self.version_unavailable.contains(worker) {
            return Err(RegistryError::VersionUnavailable(worker.clone()));
        }
        self.entries
            .get(worker)
            .cloned()
            .ok_or_else(|| RegistryError::NotFound(worker.clone()))
    }
}

crate::json::wire_entry_points!(StaticRegistry);
