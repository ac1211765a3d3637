//! How value, map and list state are laid out as bytes in the backend.
//!
//! * A value state of a key is one entry under its [`StateKey`].
//! * A map state is one entry per user key, stored under the state key
//!   followed by the user key: a prefix scan of the state key lists the
//!   map in user-key order, and deleting that prefix clears it.
//! * A list state is one entry under its state key whose value holds every
//!   element, each as `[length: u32 LE][bytes]`.
//!
//! Stored values are then framed with their expiry ([`super::ttl`]). It
//! never sees Wasm: the runtime's `state` host interface calls it.

use super::{StateError, StateKey, StateKind};

/// Append to `out` the storage key of state `name` of `kind` for `key` in
/// `key_group`, followed (for a map entry) by `user_key` (empty otherwise,
/// or for the prefix of a whole map).
pub fn entry_key_into(
    out: &mut Vec<u8>,
    key_group: u16,
    name: &str,
    kind: StateKind,
    key: &[u8],
    user_key: &[u8],
) {
    StateKey::new(key_group, name, kind, key, b"").encode_into(out);
    out.extend_from_slice(user_key);
}

/// Append list elements `values` to `out`, each as `[u32 LE length][bytes]`.
pub fn encode_list<'a>(out: &mut Vec<u8>, values: impl Iterator<Item = &'a [u8]>) {
    for value in values {
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        out.extend_from_slice(value);
    }
}

/// The elements of a list encoded by [`encode_list`].
pub fn decode_list(mut bytes: &[u8]) -> Result<Vec<Vec<u8>>, StateError> {
    let corrupt = || StateError::Corrupt("list state".into());
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (len, rest) = bytes.split_first_chunk::<4>().ok_or_else(corrupt)?;
        let len = u32::from_le_bytes(*len) as usize;
        let value = rest.get(..len).ok_or_else(corrupt)?;
        out.push(value.to_vec());
        bytes = &rest[len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_encoding_round_trips() {
        let mut bytes = Vec::new();
        encode_list(&mut bytes, [&b"a"[..], b"", b"xyz"].into_iter());
        assert_eq!(decode_list(&bytes).unwrap(), vec![b"a".to_vec(), vec![], b"xyz".to_vec()]);
        assert!(decode_list(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn map_entries_follow_their_state_key() {
        let mut prefix = Vec::new();
        entry_key_into(&mut prefix, 3, "seen", StateKind::Map, b"c1", b"");
        let mut entry = Vec::new();
        entry_key_into(&mut entry, 3, "seen", StateKind::Map, b"c1", b"u");
        assert_eq!(prefix, StateKey::new(3, "seen", StateKind::Map, b"c1", b"").encode());
        assert_eq!(entry, [prefix.as_slice(), b"u"].concat());
    }
}
