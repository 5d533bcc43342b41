//! Reads what a git index lists (each entry's size and path) straight from the index file, so
//! a caller can size a copy of the working tree, or compare the index with a walk of it,
//! without starting git.
use std::path::Path;

/// Bytes of the fixed part of an index entry before the object id: ctime, mtime, dev, ino,
/// mode, uid, gid and size, four bytes each (times are two).
const STAT_BYTES: usize = 40;
/// Offset of the file size within an entry.
const SIZE_OFFSET: usize = 36;
/// The flag of an entry (versions 3 and 4) followed by two more bytes of flags.
const EXTENDED_FLAG: u16 = 0x4000;

/// The sum of the sizes the index at `index` records for its entries (each as git stores it:
/// 32 bits), for an index of version 2, 3 or 4 with object ids of `id_bytes` bytes; `None`
/// when the file is missing or not an index this reader understands.
pub(crate) fn listed_bytes(index: &Path, id_bytes: usize) -> Option<u64> {
    let data = std::fs::read(index).ok()?;
    sum_sizes(&data, id_bytes)
}

/// The paths (relative to the top of the working tree, as git stores them) of the entries of
/// the index at `index`, in the index's order; `None` as for [`listed_bytes`].
pub(crate) fn listed_paths(index: &Path, id_bytes: usize) -> Option<Vec<Vec<u8>>> {
    let data = std::fs::read(index).ok()?;
    Some(
        read_entries(&data, id_bytes)?
            .into_iter()
            .map(|e| e.path)
            .collect(),
    )
}

fn sum_sizes(data: &[u8], id_bytes: usize) -> Option<u64> {
    Some(
        read_entries(data, id_bytes)?
            .iter()
            .map(|e| u64::from(e.size))
            .sum(),
    )
}

/// What this reader takes from one index entry.
struct Entry {
    size: u32,
    path: Vec<u8>,
}

fn read_entries(data: &[u8], id_bytes: usize) -> Option<Vec<Entry>> {
    if data.get(..4)? != b"DIRC" {
        return None;
    }
    let version = read_u32(data, 4)?;
    let count = read_u32(data, 8)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let mut at = 12;
    // Each entry is at least a stat block, an id and two bytes of flags: a count larger than
    // the file could hold is not an index.
    let mut entries = Vec::with_capacity((count as usize).min(data.len() / (STAT_BYTES + 2)));
    let mut previous: Vec<u8> = Vec::new();
    for _ in 0..count {
        let size = read_u32(data, at + SIZE_OFFSET)?;
        let flags_at = at + STAT_BYTES + id_bytes;
        let flags = u16::from_be_bytes(data.get(flags_at..flags_at + 2)?.try_into().ok()?);
        let mut path_at = flags_at + 2;
        if version >= 3 && flags & EXTENDED_FLAG != 0 {
            path_at += 2;
        }
        let path = if version == 4 {
            // How much of the previous path to drop (git's offset varint), then the rest of
            // this one, NUL-ended.
            let (drop, after) = read_offset_varint(data, path_at)?;
            let rest = data.get(after..)?.iter().position(|&b| b == 0)?;
            let kept = previous.len().checked_sub(usize::try_from(drop).ok()?)?;
            let mut path = previous[..kept].to_vec();
            path.extend_from_slice(&data[after..after + rest]);
            at = after + rest + 1;
            path
        } else {
            let name = data.get(path_at..)?.iter().position(|&b| b == 0)?;
            // The entry is NUL-padded to a multiple of eight bytes (at least one NUL).
            let length = path_at - at + name;
            let path = data[path_at..path_at + name].to_vec();
            at += (length + 8) & !7;
            path
        };
        previous.clone_from(&path);
        entries.push(Entry { size, path });
    }
    Some(entries)
}

/// Git's variable-length offset encoding: seven bits a byte, most significant first, each
/// continuation adding one before the shift. Returns the value and where the next byte is.
fn read_offset_varint(data: &[u8], mut at: usize) -> Option<(u64, usize)> {
    let mut byte = *data.get(at)?;
    at += 1;
    let mut value = u64::from(byte & 0x7f);
    while byte & 0x80 != 0 {
        byte = *data.get(at)?;
        at += 1;
        value = value.checked_add(1)?.checked_shl(7)? | u64::from(byte & 0x7f);
    }
    Some((value, at))
}

fn read_u32(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index entry of version 2 (or 3 without extended flags) for `path` of `size` bytes.
    fn entry(path: &str, size: u32) -> Vec<u8> {
        let mut out = vec![0u8; SIZE_OFFSET];
        out.extend_from_slice(&size.to_be_bytes());
        out.extend_from_slice(&[0xab; 20]);
        out.extend_from_slice(&(path.len() as u16).to_be_bytes());
        out.extend_from_slice(path.as_bytes());
        let length = out.len();
        out.resize((length + 8) & !7, 0);
        out
    }

    #[test]
    fn sizes_are_summed_and_anything_else_is_refused() {
        let mut index = b"DIRC".to_vec();
        index.extend_from_slice(&2u32.to_be_bytes());
        index.extend_from_slice(&3u32.to_be_bytes());
        for (path, size) in [("a", 5), ("dir/abcdef", 1_000), ("long-name.txt", 7)] {
            index.extend(entry(path, size));
        }
        assert_eq!(sum_sizes(&index, 20), Some(1_012));
        assert_eq!(sum_sizes(&index[..index.len() - 9], 20), None, "truncated");
        assert_eq!(sum_sizes(b"NOPE", 20), None);
    }

    #[test]
    fn paths_are_read_from_real_indexes_of_every_version() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        let git = |args: &[&str]| {
            let output = std::process::Command::new("git")
                .args(args)
                .current_dir(root)
                .env_remove("GIT_INDEX_FILE")
                .output()
                .expect("git runs");
            assert!(output.status.success(), "git {args:?}");
            output.stdout
        };
        git(&["init", "--quiet"]);
        for path in [
            "a",
            "dir/abcdef",
            "dir/abcxyz",
            "dir/sub/deep.txt",
            "long-name.txt",
        ] {
            let file = root.join(path);
            std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
            std::fs::write(file, path).expect("write");
        }
        git(&["add", "--all"]);
        let expected: Vec<Vec<u8>> = git(&["ls-files", "-z"])
            .split(|&b| b == 0)
            .filter(|p| !p.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        assert_eq!(expected.len(), 5);
        for version in ["2", "3", "4"] {
            git(&["update-index", "--index-version", version]);
            let index = root.join(".git/index");
            assert_eq!(
                listed_paths(&index, 20),
                Some(expected.clone()),
                "v{version}"
            );
        }
    }
}
