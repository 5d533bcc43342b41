//! Reads the byte count of the files a git index lists straight from the index file, so a
//! caller can size a copy of the working tree without starting git.

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

fn sum_sizes(data: &[u8], id_bytes: usize) -> Option<u64> {
    if data.get(..4)? != b"DIRC" {
        return None;
    }
    let version = read_u32(data, 4)?;
    let entries = read_u32(data, 8)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let mut at = 12;
    let mut total: u64 = 0;
    for _ in 0..entries {
        total += u64::from(read_u32(data, at + SIZE_OFFSET)?);
        let flags_at = at + STAT_BYTES + id_bytes;
        let flags = u16::from_be_bytes(data.get(flags_at..flags_at + 2)?.try_into().ok()?);
        let mut path_at = flags_at + 2;
        if version >= 3 && flags & EXTENDED_FLAG != 0 {
            path_at += 2;
        }
        if version == 4 {
            // A varint (how much of the previous path to drop), then the rest, NUL-ended.
            while *data.get(path_at)? & 0x80 != 0 {
                path_at += 1;
            }
            path_at += 1;
            let name = data.get(path_at..)?.iter().position(|&b| b == 0)?;
            at = path_at + name + 1;
        } else {
            let name = data.get(path_at..)?.iter().position(|&b| b == 0)?;
            // The entry is NUL-padded to a multiple of eight bytes (at least one NUL).
            let length = path_at - at + name;
            at += (length + 8) & !7;
        }
    }
    Some(total)
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
}
