//! Keeps the packs Trellis's checkpoints write few. Every checkpoint adds packs (`git add`'s
//! blobs, `fast-import`'s trees and commit), and every git process looks through every pack
//! index it finds, so hundreds of checkpoints — within one run or over many runs in one
//! repository — would slow each later one down until the user's `gc`. The packs Trellis wrote
//! in a repository (and only those) are listed in a file beside its objects
//! (`trellis/own-packs` in git's common directory, shared by every run and worktree, guarded by
//! a lock file) and rolled up into one whenever they grow past a few, in a geometric
//! progression (a pack is rolled up again only when the smaller ones together come near its
//! size), so each object is rewritten a few times at most. Rolling up keeps every object of the
//! packs it reads: nothing reachable or not is lost, the user's packs and loose objects are
//! never read, rewritten or removed.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::WorkspaceError;
use crate::repo::Repository;

/// Most packs of Trellis's own in a repository before they are rolled up.
pub(crate) const MAX_OWN_PACKS: usize = 8;
/// A pack that stays must hold at least this many times the objects of all smaller ones.
const GROWTH_FACTOR: u64 = 2;

/// A pack Trellis wrote: its name (`pack-<hash>`) and how many objects it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnPack {
    pub name: String,
    pub objects: u64,
}

/// The packs Trellis wrote in one repository, kept in its list file; every change happens
/// under the list's lock, so runs in worktrees of one repository take turns.
#[derive(Debug)]
pub(crate) struct OwnPacks {
    /// `<common dir>/trellis/own-packs`.
    list: PathBuf,
}

/// The list, locked for one change.
struct Locked {
    _lock: std::fs::File,
    list: PathBuf,
    packs: Vec<OwnPack>,
}

impl Locked {
    fn save(&self) -> Result<(), WorkspaceError> {
        let text: String = self
            .packs
            .iter()
            .map(|pack| format!("{} {}\n", pack.name, pack.objects))
            .collect();
        let temporary = self.list.with_extension("tmp");
        std::fs::write(&temporary, text)
            .and_then(|()| std::fs::rename(&temporary, &self.list))
            .map_err(|e| WorkspaceError::io(format!("cannot write {}", self.list.display()), e))
    }
}

impl OwnPacks {
    /// The list of the packs Trellis wrote in `repo`.
    pub(crate) fn of(repo: &Repository) -> Self {
        Self {
            list: repo.common_dir().join("trellis").join("own-packs"),
        }
    }

    /// Takes the list's lock and reads it, leaving out packs that are gone (the user's `gc`
    /// packed their objects into a pack of its own).
    fn lock(&self, pack_dir: &Path) -> Result<Locked, WorkspaceError> {
        let io = |what: &str, e| WorkspaceError::io(format!("{what} {}", self.list.display()), e);
        if let Some(dir) = self.list.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io("cannot create the folder of", e))?;
        }
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.list.with_extension("lock"))
            .map_err(|e| io("cannot open the lock of", e))?;
        lock.lock().map_err(|e| io("cannot lock", e))?;
        let text = match std::fs::read_to_string(&self.list) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io("cannot read", e)),
        };
        let packs = text
            .lines()
            .filter_map(|line| {
                let (name, objects) = line.split_once(' ')?;
                Some(OwnPack {
                    name: name.to_owned(),
                    objects: objects.parse().ok()?,
                })
            })
            .filter(|pack| pack_dir.join(format!("{}.idx", pack.name)).exists())
            .collect();
        Ok(Locked {
            _lock: lock,
            list: self.list.clone(),
            packs,
        })
    }

    /// Adds the packs in the pack directory that were not in `before` (its listing just
    /// before one of Trellis's writes) and are complete (no `.keep`: a pack still being
    /// written by someone holds one).
    pub(crate) fn record(
        &self,
        pack_dir: &Path,
        before: &BTreeSet<String>,
    ) -> Result<(), WorkspaceError> {
        let new: Vec<OwnPack> = pack_names(pack_dir)
            .difference(before)
            .filter(|name| !pack_dir.join(format!("{name}.keep")).exists())
            .filter_map(|name| {
                let objects = object_count(&pack_dir.join(format!("{name}.pack")))?;
                Some(OwnPack {
                    name: name.clone(),
                    objects,
                })
            })
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        let mut locked = self.lock(pack_dir)?;
        for pack in new {
            if !locked.packs.iter().any(|known| known.name == pack.name) {
                locked.packs.push(pack);
            }
        }
        locked.save()
    }

    /// Rolls the smallest packs up into one when there are more than [`MAX_OWN_PACKS`].
    pub(crate) fn consolidate(&self, repo: &Repository) -> Result<(), WorkspaceError> {
        let pack_dir = pack_dir(repo);
        let mut locked = self.lock(&pack_dir)?;
        if locked.packs.len() <= MAX_OWN_PACKS {
            return Ok(());
        }
        let result = roll_up(repo, &pack_dir, &mut locked.packs);
        locked.save()?;
        result
    }
}

/// Rolls the smallest of `packs` up into one pack; `packs` is left listing what is Trellis's
/// afterwards (a pack that could not be read is no longer counted).
fn roll_up(
    repo: &Repository,
    pack_dir: &Path,
    packs: &mut Vec<OwnPack>,
) -> Result<(), WorkspaceError> {
    packs.sort_by_key(|pack| pack.objects);
    let counts: Vec<u64> = packs.iter().map(|pack| pack.objects).collect();
    let rolled: Vec<OwnPack> = packs.drain(..roll_up_length(&counts)).collect();
    // The objects are named one by one (read from the packs' indexes): `--stdin-packs`
    // would walk the commits of the packs and every tree they reach, which grows with the
    // repository, not with the objects rolled up.
    let mut input = Vec::new();
    let mut readable = Vec::with_capacity(rolled.len());
    for pack in rolled {
        // One that cannot be read (gone, or a format this reader does not know) is left
        // alone and no longer counted as Trellis's.
        if let Some(listed) = listed_objects(&pack_dir.join(format!("{}.idx", pack.name))) {
            input.extend_from_slice(listed.as_bytes());
            readable.push(pack);
        }
    }
    let rolled = readable;
    let base = pack_dir.join("pack");
    let base = base.to_string_lossy();
    let args = [
        "-c",
        "pack.writeReverseIndex=false",
        "pack-objects",
        "--quiet",
        "--delta-base-offset",
        // No delta search: the objects are copied as they are (deltas kept), so a roll-up
        // costs what copying them costs.
        "--window=0",
        base.as_ref(),
    ];
    let stdout = match repo.git().run_with_input(repo.top(), &args, &[], input) {
        Ok(stdout) => stdout,
        Err(error) => {
            // Nothing was removed: the packs are still Trellis's to roll up next time.
            packs.extend(rolled);
            return Err(error);
        }
    };
    let hash = String::from_utf8_lossy(&stdout).trim().to_owned();
    let name = format!("pack-{hash}");
    let objects = object_count(&pack_dir.join(format!("{name}.pack")));
    let Some(objects) = objects.filter(|_| !hash.is_empty()) else {
        packs.extend(rolled);
        return Err(WorkspaceError::Unexpected {
            command: "pack-objects".into(),
            detail: format!("no pack named {hash:?}"),
        });
    };
    // The new pack is complete (git renames its index into place last) before any rolled
    // up pack goes; a pack's index goes first so no new reader adopts it.
    for pack in rolled.iter().filter(|pack| pack.name != name) {
        for extension in ["idx", "pack", "rev"] {
            let path = pack_dir.join(format!("{}.{extension}", pack.name));
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(WorkspaceError::io(
                        format!("cannot remove {}", path.display()),
                        e,
                    ));
                }
                _ => {}
            }
        }
    }
    packs.push(OwnPack { name, objects });
    Ok(())
}

/// How many of the smallest packs (object counts sorted ascending) to roll up: the fewest
/// (at least two) after which every remaining pack holds at least [`GROWTH_FACTOR`] times the
/// objects of all packs below it, the rolled-up one included; all of them when none does.
pub(crate) fn roll_up_length(counts: &[u64]) -> usize {
    let total = |slice: &[u64]| slice.iter().sum::<u64>();
    (2..counts.len())
        .find(|&split| {
            (split..counts.len())
                .all(|i| counts[i] >= GROWTH_FACTOR.saturating_mul(total(&counts[..i])))
        })
        .unwrap_or(counts.len())
}

/// The repository's pack directory.
pub(crate) fn pack_dir(repo: &Repository) -> PathBuf {
    repo.common_dir().join("objects").join("pack")
}

/// The names (`pack-<hash>`) of the packs whose index is in `pack_dir`.
pub(crate) fn pack_names(pack_dir: &Path) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(pack_dir) else {
        return BTreeSet::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            Some(name.strip_suffix(".idx")?.to_owned())
        })
        .filter(|name| name.starts_with("pack-"))
        .collect()
}

/// The object ids a pack index of version 2 lists, one hex id a line. The id length follows
/// from the file's size: header and fan-out table, then per object its id, a checksum and an
/// offset, then two ids (no large offsets: a pack this small never needs them).
fn listed_objects(idx: &Path) -> Option<String> {
    use std::fmt::Write;
    let data = std::fs::read(idx).ok()?;
    if data.get(..8)? != b"\xfftOc\x00\x00\x00\x02" {
        return None;
    }
    let count = u32::from_be_bytes(data.get(1028..1032)?.try_into().ok()?) as usize;
    let id_bytes = [20usize, 32]
        .into_iter()
        .find(|&id| data.len() == 1032 + count * (id + 8) + 2 * id)?;
    let ids = data.get(1032..1032 + count * id_bytes)?;
    let mut out = String::with_capacity(count * (2 * id_bytes + 1));
    for id in ids.chunks_exact(id_bytes) {
        for byte in id {
            let _ = write!(out, "{byte:02x}");
        }
        out.push('\n');
    }
    Some(out)
}

/// The object count in a pack's header (`PACK`, version, count: four bytes each).
fn object_count(pack: &Path) -> Option<u64> {
    let mut header = [0u8; 12];
    std::fs::File::open(pack)
        .ok()?
        .read_exact(&mut header)
        .ok()?;
    if &header[..4] != b"PACK" {
        return None;
    }
    let count: [u8; 4] = header[8..12].try_into().ok()?;
    Some(u64::from(u32::from_be_bytes(count)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smallest_packs_are_rolled_up_until_the_rest_grow_geometrically() {
        // Nine packs of a checkpoint each: all of them.
        assert_eq!(roll_up_length(&[20; 9]), 9);
        // A big rolled-up pack stays while the small ones are far smaller together.
        assert_eq!(roll_up_length(&[20, 20, 20, 20, 20, 20, 20, 20, 400]), 8);
        // Once the small ones together come near it, it is rolled up with them.
        assert_eq!(roll_up_length(&[20, 20, 20, 20, 20, 20, 20, 20, 250]), 9);
        // Two already in progression above the rolled-up pair stay.
        assert_eq!(roll_up_length(&[10, 10, 100, 1_000]), 2);
    }
}
