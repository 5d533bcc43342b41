//! The profile store: one JSON file per profile, `profiles/<name>.json` in the state
//! directory, written atomically (a temporary file in the same directory, flushed, renamed
//! over the old one) under an exclusive lock on `profiles/.lock`, so a revision check and the
//! write it guards are one step for every process sharing the directory.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;
use trellis_graph::limits::MAX_DOCUMENT_BYTES;

use crate::profiles::document::{PROFILE_FORMAT, Profile, ProfileDefinition, ProfileSummary};
use crate::profiles::name::ProfileName;
use crate::shared::profile_error::ProfileError;

/// Which revision a change expects to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectedRevision {
    /// No revision named: the profile must not exist yet.
    New,
    /// The profile must be at this revision.
    At(u64),
    /// Whatever is there (`--force`).
    Any,
}

impl ExpectedRevision {
    fn named(self) -> Option<u64> {
        match self {
            Self::At(revision) => Some(revision),
            Self::New | Self::Any => None,
        }
    }
}

/// Every stored profile, and those whose file cannot be read (they hide no other).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileListing {
    pub profiles: Vec<ProfileSummary>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<UnreadableProfile>,
}

/// A profile file that cannot be read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnreadableProfile {
    pub name: String,
    pub reason: String,
}

/// The profiles of one state directory.
#[derive(Debug, Clone)]
pub(crate) struct ProfileStore {
    dir: PathBuf,
}

impl ProfileStore {
    /// The store under the state directory `home` (its directory made, mode 0700, if missing).
    pub fn open(home: &Path) -> Result<Self, ProfileError> {
        let dir = home.join("profiles");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| ProfileError::io(format!("cannot create {}", dir.display()), &e))?;
        Ok(Self { dir })
    }

    fn path_of(&self, name: &ProfileName) -> PathBuf {
        self.dir.join(format!("{name}.json"))
    }

    /// Every profile, by name.
    pub fn list(&self) -> Result<ProfileListing, ProfileError> {
        let entries = std::fs::read_dir(&self.dir)
            .map_err(|e| ProfileError::io(format!("cannot list {}", self.dir.display()), &e))?;
        let mut listing = ProfileListing {
            profiles: Vec::new(),
            unreadable: Vec::new(),
        };
        for entry in entries.filter_map(Result::ok) {
            let file_name = entry.file_name();
            let Some(name) = file_name
                .to_str()
                .and_then(|file| file.strip_suffix(".json"))
                .and_then(|stem| ProfileName::parse(stem).ok())
            else {
                // The lock, temporary files and anything else that is not a profile.
                continue;
            };
            match self.read(&name) {
                Ok(Some(profile)) => listing.profiles.push(profile.summary()),
                Ok(None) => {}
                Err(error) => listing.unreadable.push(UnreadableProfile {
                    name: name.to_string(),
                    reason: error.to_string(),
                }),
            }
        }
        listing.profiles.sort_by(|a, b| a.name.cmp(&b.name));
        listing.unreadable.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(listing)
    }

    /// The profile named `name`.
    pub fn load(&self, name: &ProfileName) -> Result<Profile, ProfileError> {
        self.read(name)?
            .ok_or_else(|| ProfileError::NotFound(name.to_string()))
    }

    /// Writes `definition` as the next revision of `name` if its current revision is the one
    /// `expected`; returns what was written and the revision it replaced.
    pub fn save(
        &self,
        name: &ProfileName,
        definition: ProfileDefinition,
        identity: String,
        expected: ExpectedRevision,
        saved_at_ms: u64,
    ) -> Result<(Profile, Option<u64>), ProfileError> {
        let mut lock = self.lock()?;
        let current = self.read(name)?.map(|p| p.revision);
        check_revision(name, current, expected)?;
        let revision = self.next_revision(&mut lock, current)?;
        let profile = Profile {
            format: PROFILE_FORMAT.to_owned(),
            name: name.to_string(),
            revision,
            saved_at_ms,
            identity,
            definition,
        };
        let mut bytes = serde_json::to_vec_pretty(&profile)
            .map_err(|e| ProfileError::Invalid(e.to_string()))?;
        bytes.push(b'\n');
        if bytes.len() > MAX_DOCUMENT_BYTES {
            return Err(ProfileError::Invalid(format!(
                "it is {} bytes; a profile holds at most 16 MiB",
                bytes.len()
            )));
        }
        self.write_atomically(name, &bytes)?;
        Ok((profile, current))
    }

    /// Deletes `name` if its current revision is the one `expected`; returns the revision
    /// deleted.
    pub fn delete(
        &self,
        name: &ProfileName,
        expected: ExpectedRevision,
    ) -> Result<u64, ProfileError> {
        let _lock = self.lock()?;
        let Some(current) = self.read(name)?.map(|p| p.revision) else {
            return Err(ProfileError::NotFound(name.to_string()));
        };
        check_revision(name, Some(current), expected)?;
        let path = self.path_of(name);
        std::fs::remove_file(&path)
            .map_err(|e| ProfileError::io(format!("cannot delete {}", path.display()), &e))?;
        self.sync_dir();
        Ok(current)
    }

    /// Reads a profile file; `None` when there is none.
    fn read(&self, name: &ProfileName) -> Result<Option<Profile>, ProfileError> {
        let path = self.path_of(name);
        let unreadable = |reason: String| ProfileError::Unreadable {
            name: name.to_string(),
            reason,
        };
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(unreadable(e.to_string())),
        };
        let mut text = String::new();
        file.take(MAX_DOCUMENT_BYTES as u64 + 1)
            .read_to_string(&mut text)
            .map_err(|e| unreadable(e.to_string()))?;
        if text.len() > MAX_DOCUMENT_BYTES {
            return Err(unreadable("it is larger than 16 MiB".to_owned()));
        }
        let value = trellis_graph::json::parse_strict(&text)
            .map_err(|e| unreadable(format!("not JSON: {e}")))?;
        let profile = Profile::from_document(value).map_err(|e| unreadable(e.to_string()))?;
        if profile.name != name.as_str() {
            return Err(unreadable(format!(
                "it names itself {:?}, not its file's name",
                profile.name
            )));
        }
        Ok(Some(profile))
    }

    /// The store's lock, held until the returned file is dropped (waits for another holder).
    /// The next revision, above every one this store ever issued (the lock file, held, keeps
    /// the last): a profile deleted and saved again never repeats an old revision, so an
    /// editor still holding one of the deleted profile's cannot overwrite the new one.
    fn next_revision(&self, lock: &mut File, current: Option<u64>) -> Result<u64, ProfileError> {
        use std::io::{Read, Seek, SeekFrom, Write};
        let io = |e: std::io::Error| {
            ProfileError::io(
                format!("cannot keep the revision in {}", self.dir.display()),
                &e,
            )
        };
        let mut text = String::new();
        lock.seek(SeekFrom::Start(0)).map_err(io)?;
        // Unreadable or empty counts as none issued yet: the current revision still bounds it.
        let _ = lock.read_to_string(&mut text);
        let last = text.trim().parse::<u64>().unwrap_or(0);
        let next = last.max(current.unwrap_or(0)).saturating_add(1);
        lock.set_len(0).map_err(io)?;
        lock.seek(SeekFrom::Start(0)).map_err(io)?;
        lock.write_all(next.to_string().as_bytes()).map_err(io)?;
        Ok(next)
    }

    fn lock(&self) -> Result<File, ProfileError> {
        let path = self.dir.join(".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| ProfileError::io(format!("cannot open {}", path.display()), &e))?;
        file.lock()
            .map_err(|e| ProfileError::io(format!("cannot lock {}", path.display()), &e))?;
        Ok(file)
    }

    fn write_atomically(&self, name: &ProfileName, bytes: &[u8]) -> Result<(), ProfileError> {
        let target = self.path_of(name);
        // A dot name: never read as a profile, even if a crash leaves it behind.
        let temporary = self
            .dir
            .join(format!(".{name}.json.{}.tmp", std::process::id()));
        let io = |what: &str, e: std::io::Error| {
            ProfileError::io(format!("cannot {what} {}", temporary.display()), &e)
        };
        let written = (|| {
            let mut file = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .mode(0o600)
                .open(&temporary)
                .map_err(|e| io("create", e))?;
            file.write_all(bytes).map_err(|e| io("write", e))?;
            file.sync_all().map_err(|e| io("flush", e))?;
            std::fs::rename(&temporary, &target).map_err(|e| io("rename", e))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        written?;
        self.sync_dir();
        Ok(())
    }

    /// Makes a rename or removal durable (best effort: some file systems refuse it).
    fn sync_dir(&self) {
        if let Ok(dir) = File::open(&self.dir) {
            let _ = dir.sync_all();
        }
    }
}

fn check_revision(
    name: &ProfileName,
    current: Option<u64>,
    expected: ExpectedRevision,
) -> Result<(), ProfileError> {
    let fits = match expected {
        ExpectedRevision::Any => true,
        ExpectedRevision::New => current.is_none(),
        ExpectedRevision::At(revision) => current == Some(revision),
    };
    if fits {
        return Ok(());
    }
    Err(ProfileError::RevisionConflict {
        name: name.to_string(),
        current,
        expected: expected.named(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn definition(value: i64) -> ProfileDefinition {
        ProfileDefinition {
            graph: Some(json!({"g": value})),
            ..ProfileDefinition::default()
        }
    }

    #[test]
    fn revisions_guard_every_change() {
        let home = tempfile::tempdir().unwrap();
        let store = ProfileStore::open(home.path()).unwrap();
        let name = ProfileName::parse("nightly").unwrap();
        let (first, replaced) = store
            .save(&name, definition(1), "id".into(), ExpectedRevision::New, 1)
            .unwrap();
        assert_eq!((first.revision, replaced), (1, None));
        let again = store.save(&name, definition(2), "id".into(), ExpectedRevision::New, 2);
        assert_eq!(
            again.unwrap_err(),
            ProfileError::RevisionConflict {
                name: "nightly".into(),
                current: Some(1),
                expected: None
            }
        );
        let (second, replaced) = store
            .save(
                &name,
                definition(2),
                "id".into(),
                ExpectedRevision::At(1),
                3,
            )
            .unwrap();
        assert_eq!((second.revision, replaced), (2, Some(1)));
        let stale = store
            .save(
                &name,
                definition(3),
                "id".into(),
                ExpectedRevision::At(1),
                4,
            )
            .unwrap_err();
        let message = stale.to_string();
        assert!(
            message.contains("revision 2") && message.contains("revision 1"),
            "{message}"
        );
        assert_eq!(store.load(&name).unwrap().definition, definition(2));
        assert!(store.delete(&name, ExpectedRevision::At(1)).is_err());
        assert_eq!(store.delete(&name, ExpectedRevision::At(2)).unwrap(), 2);
        assert_eq!(store.load(&name).unwrap_err().code(), "profile.not_found");
        // Only the lock is left: no temporary file survives a save.
        let left: Vec<_> = std::fs::read_dir(home.path().join("profiles"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, [".lock"]);
    }

    #[test]
    fn of_concurrent_saves_from_one_revision_exactly_one_wins() {
        let home = tempfile::tempdir().unwrap();
        let store = ProfileStore::open(home.path()).unwrap();
        let name = ProfileName::parse("shared").unwrap();
        store
            .save(&name, definition(0), "id".into(), ExpectedRevision::New, 1)
            .unwrap();
        // Each editor read revision 1; each opens the store on its own, as processes do.
        let outcomes: Vec<_> = std::thread::scope(|scope| {
            let editors: Vec<_> = (1..=8)
                .map(|editor| {
                    let (dir, name) = (home.path(), &name);
                    scope.spawn(move || {
                        let store = ProfileStore::open(dir).unwrap();
                        store
                            .save(
                                name,
                                definition(editor),
                                "id".into(),
                                ExpectedRevision::At(1),
                                2,
                            )
                            .map(|(profile, _)| profile.definition)
                    })
                })
                .collect();
            editors.into_iter().map(|e| e.join().unwrap()).collect()
        });
        let won: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
        assert_eq!(won.len(), 1, "{outcomes:?}");
        for lost in outcomes.iter().filter_map(|o| o.as_ref().err()) {
            assert_eq!(
                *lost,
                ProfileError::RevisionConflict {
                    name: "shared".into(),
                    current: Some(2),
                    expected: Some(1)
                }
            );
        }
        let stored = store.load(&name).unwrap();
        assert_eq!((stored.revision, &stored.definition), (2, won[0]));
    }

    #[test]
    fn a_damaged_file_is_named_and_hides_no_other() {
        let home = tempfile::tempdir().unwrap();
        let store = ProfileStore::open(home.path()).unwrap();
        let good = ProfileName::parse("good").unwrap();
        store
            .save(&good, definition(1), "id".into(), ExpectedRevision::Any, 1)
            .unwrap();
        std::fs::write(home.path().join("profiles/bad.json"), "{").unwrap();
        let listing = store.list().unwrap();
        assert_eq!(listing.profiles.len(), 1);
        assert_eq!(listing.unreadable[0].name, "bad");
        let bad = ProfileName::parse("bad").unwrap();
        assert_eq!(store.load(&bad).unwrap_err().code(), "profile.unreadable");
    }

    #[test]
    fn a_profile_saved_again_after_deletion_never_repeats_a_revision() {
        let home = tempfile::tempdir().unwrap();
        let store = ProfileStore::open(home.path()).unwrap();
        let name = ProfileName::parse("again").unwrap();
        let (first, _) = store
            .save(&name, definition(1), "id".into(), ExpectedRevision::New, 1)
            .unwrap();
        store
            .delete(&name, ExpectedRevision::At(first.revision))
            .unwrap();
        let (second, _) = store
            .save(&name, definition(2), "id".into(), ExpectedRevision::New, 2)
            .unwrap();
        assert!(second.revision > first.revision);
        let stale = store.save(
            &name,
            definition(3),
            "id".into(),
            ExpectedRevision::At(first.revision),
            3,
        );
        assert!(stale.is_err(), "the deleted profile's revision is stale");
    }
}
