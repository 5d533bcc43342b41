//! Keeps the packs a run's checkpoints write few. Every checkpoint adds packs (`git add`'s
//! blobs, `fast-import`'s trees and commit), and every git process looks through every pack
//! index it finds, so hundreds of checkpoints would slow each later one down until the
//! user's `gc`. The packs this run wrote (and only those) are rolled up into one whenever
//! they grow past a few, in a geometric progression (a pack is rolled up again only when the
//! smaller ones together come near its size), so each object is rewritten a few times at
//! most. Rolling up keeps every object of the packs it reads: nothing reachable or not is
//! lost, the user's packs and loose objects are never read, rewritten or removed.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::WorkspaceError;
use crate::repo::Repository;

/// Most packs of a run's own before they are rolled up.
pub(crate) const MAX_OWN_PACKS: usize = 8;
/// A pack that stays must hold at least this many times the objects of all smaller ones.
const GROWTH_FACTOR: u64 = 2;

/// A pack this run wrote: its name (`pack-<hash>`) and how many objects it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnPack {
    pub name: String,
    pub objects: u64,
}

/// The packs a run wrote, found by listing the pack directory around each of its writes.
#[derive(Debug, Default)]
pub(crate) struct OwnPacks {
    packs: Vec<OwnPack>,
}

impl OwnPacks {
    /// Adds the packs in `after` that were not in `before` (listings of the pack directory
    /// just before and after one of this run's writes) and are complete (no `.keep`: a pack
    /// still being written by someone holds one).
    pub(crate) fn record(&mut self, pack_dir: &Path, before: &BTreeSet<String>) {
        for name in pack_names(pack_dir).difference(before) {
            if pack_dir.join(format!("{name}.keep")).exists() {
                continue;
            }
            if let Some(objects) = object_count(&pack_dir.join(format!("{name}.pack"))) {
                self.packs.push(OwnPack {
                    name: name.clone(),
                    objects,
                });
            }
        }
    }

    /// Rolls the smallest packs up into one when there are more than [`MAX_OWN_PACKS`].
    pub(crate) fn consolidate(&mut self, repo: &Repository) -> Result<(), WorkspaceError> {
        if self.packs.len() <= MAX_OWN_PACKS {
            return Ok(());
        }
        self.packs.sort_by_key(|pack| pack.objects);
        let counts: Vec<u64> = self.packs.iter().map(|pack| pack.objects).collect();
        let rolled: Vec<OwnPack> = self.packs.drain(..roll_up_length(&counts)).collect();
        let pack_dir = pack_dir(repo);
        // The objects are named one by one (read from the packs' indexes): `--stdin-packs`
        // would walk the commits of the packs and every tree they reach, which grows with the
        // repository, not with the objects rolled up.
        let mut input = Vec::new();
        let mut readable = Vec::with_capacity(rolled.len());
        for pack in rolled {
            // One that cannot be read (gone, or a format this reader does not know) is left
            // alone and no longer counted as the run's.
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
        let stdout = repo.git().run_with_input(repo.top(), &args, &[], input);
        let stdout = match stdout {
            Ok(stdout) => stdout,
            Err(error) => {
                // Nothing was removed: the packs are still ours to roll up next time.
                self.packs.extend(rolled);
                return Err(error);
            }
        };
        let hash = String::from_utf8_lossy(&stdout).trim().to_owned();
        let name = format!("pack-{hash}");
        let objects = object_count(&pack_dir.join(format!("{name}.pack")));
        let Some(objects) = objects.filter(|_| !hash.is_empty()) else {
            self.packs.extend(rolled);
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
        self.packs.push(OwnPack { name, objects });
        Ok(())
    }
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
