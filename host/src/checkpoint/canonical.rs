//! The canonical savepoint format: a backend-independent list of state
//! entries, so a savepoint restores into any backend, at any parallelism.
//!
//! ```text
//! "WEIR-SAVEPOINT-1\n"
//! repeated: key len (u32 LE) · key · value len (u32 LE) · value
//! end:      0xFFFF_FFFF · entry count (u64 LE)
//! ```
//!
//! Keys are Weir's own state keys (`[key group u16 BE][state name]…`, see
//! `state::key`), so the key group of every entry is its first two bytes
//! and entries come in key-group order. The end marker and count make a
//! truncated file an error rather than a silent loss.

use std::path::Path;

use super::CheckpointError;
use crate::state::{RocksDbBackend, StateError, BROADCAST_KEY_GROUP};

const MAGIC: &[u8] = b"WEIR-SAVEPOINT-1\n";
const END: u32 = u32::MAX;

/// One encoded file and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// The file's bytes.
    pub bytes: Vec<u8>,
    /// Number of entries.
    pub entries: u64,
    /// Smallest and largest key group present (`None` when empty).
    pub key_groups: Option<(u16, u16)>,
}

/// Encode every entry of the RocksDB checkpoint in `dir`; broadcast
/// state (the same in every subtask of a stage) only if `broadcast`.
pub fn encode_database(dir: &Path, broadcast: bool) -> Result<Encoded, CheckpointError> {
    let db = RocksDbBackend::open_read_only(dir)?;
    let mut encoded = Encoded { bytes: MAGIC.to_vec(), entries: 0, key_groups: None };
    db.for_each(|key, value| {
        let group = key_group_of(key)?;
        if group == BROADCAST_KEY_GROUP && !broadcast {
            return Ok(());
        }
        encoded.key_groups = Some(
            encoded
                .key_groups
                .map_or((group, group), |(low, high)| (low.min(group), high.max(group))),
        );
        for part in [key, value] {
            let len = u32::try_from(part.len())
                .ok()
                .filter(|l| *l != END)
                .ok_or_else(|| StateError::Corrupt("a state entry of 4 GiB or more".into()))?;
            encoded.bytes.extend_from_slice(&len.to_le_bytes());
            encoded.bytes.extend_from_slice(part);
        }
        encoded.entries += 1;
        Ok(())
    })?;
    encoded.bytes.extend_from_slice(&END.to_le_bytes());
    encoded.bytes.extend_from_slice(&encoded.entries.to_le_bytes());
    Ok(encoded)
}

/// Call `f` with every entry of an encoded file, in order; returns the
/// number of entries.
pub fn decode(
    bytes: &[u8],
    mut f: impl FnMut(&[u8], &[u8]) -> Result<(), StateError>,
) -> Result<u64, CheckpointError> {
    let corrupt = |what: &str| CheckpointError::Corrupt(format!("savepoint state file: {what}"));
    let mut rest = bytes.strip_prefix(MAGIC).ok_or_else(|| corrupt("not a Weir savepoint file"))?;
    let take = |rest: &mut &[u8], n: usize| -> Result<Vec<u8>, CheckpointError> {
        if rest.len() < n {
            return Err(corrupt("truncated"));
        }
        let (head, tail) = rest.split_at(n);
        *rest = tail;
        Ok(head.to_vec())
    };
    let mut entries = 0u64;
    loop {
        let len =
            u32::from_le_bytes(take(&mut rest, 4)?.try_into().map_err(|_| corrupt("truncated"))?);
        if len == END {
            let count = u64::from_le_bytes(
                take(&mut rest, 8)?.try_into().map_err(|_| corrupt("truncated"))?,
            );
            if count != entries || !rest.is_empty() {
                return Err(corrupt("entry count does not match"));
            }
            return Ok(entries);
        }
        let key = take(&mut rest, len as usize)?;
        let value_len =
            u32::from_le_bytes(take(&mut rest, 4)?.try_into().map_err(|_| corrupt("truncated"))?);
        let value = take(&mut rest, value_len as usize)?;
        key_group_of(&key)?;
        f(&key, &value)?;
        entries += 1;
    }
}

fn key_group_of(key: &[u8]) -> Result<u16, StateError> {
    match key {
        [a, b, ..] => Ok(u16::from_be_bytes([*a, *b])),
        _ => Err(StateError::Corrupt("a state key shorter than its key group".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::KeyedStateBackend;

    #[test]
    fn round_trips_and_rejects_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = RocksDbBackend::open(&dir.path().join("live")).unwrap();
        db.put(&[0, 9, b'a'], b"1").unwrap();
        db.put(&[0, 2, b'b'], b"").unwrap();
        db.checkpoint(&dir.path().join("chk"), crate::state::SnapshotForm::Database).unwrap();
        let encoded = encode_database(&dir.path().join("chk"), true).unwrap();
        assert_eq!((encoded.entries, encoded.key_groups), (2, Some((2, 9))));
        let mut seen = Vec::new();
        decode(&encoded.bytes, |k, v| {
            seen.push((k.to_vec(), v.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![(vec![0, 2, b'b'], vec![]), (vec![0, 9, b'a'], b"1".to_vec())]);
        let truncated = &encoded.bytes[..encoded.bytes.len() - 3];
        assert!(decode(truncated, |_, _| Ok(())).unwrap_err().to_string().contains("truncated"));
        assert!(decode(b"garbage", |_, _| Ok(())).is_err());
    }
}
