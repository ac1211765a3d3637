//! Short byte strings kept in place: the state cache's keys and values.
//!
//! A cached entry lives in one bucket of the cache's table, and a lookup
//! of a key the CPU's caches do not hold waits for every cache line of its
//! bucket. [`InlineBytes`] keeps up to `N` bytes in `N + 2` bytes of its
//! own (a tag and a length), where a `SmallVec` of the same inline room
//! takes `N + 8` and an `Option` of it 8 more: a key of up to 62 bytes and
//! a value of up to 22, with the slot's flags, fill 96 bytes, two cache
//! lines wherever a 32-byte aligned bucket begins (a `SmallVec` key of 48
//! bytes and value of 24 took 104, three lines for half the buckets).

use std::ops::Deref;

/// Up to `N` bytes (at most 255) in place, longer ones on the heap.
#[derive(Clone, Debug)]
pub(super) enum InlineBytes<const N: usize> {
    /// `bytes[..len]`.
    Inline { len: u8, bytes: [u8; N] },
    /// Longer than `N`.
    Heap(Box<[u8]>),
}

impl<const N: usize> InlineBytes<N> {
    /// A copy of `bytes`.
    pub(super) fn from_slice(bytes: &[u8]) -> Self {
        const { assert!(N <= u8::MAX as usize) };
        if bytes.len() <= N {
            let mut inline = [0; N];
            inline[..bytes.len()].copy_from_slice(bytes);
            Self::Inline { len: bytes.len() as u8, bytes: inline }
        } else {
            Self::Heap(bytes.into())
        }
    }

    /// Hold `bytes` instead, in the same place when they fit it (no
    /// allocation when a value changes and keeps its length).
    pub(super) fn set(&mut self, bytes: &[u8]) {
        match self {
            Self::Heap(held) if held.len() == bytes.len() => held.copy_from_slice(bytes),
            Self::Inline { len, bytes: inline } if bytes.len() <= N => {
                inline[..bytes.len()].copy_from_slice(bytes);
                *len = bytes.len() as u8;
            }
            _ => *self = Self::from_slice(bytes),
        }
    }
}

impl<const N: usize> Deref for InlineBytes<N> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Self::Heap(bytes) => bytes,
        }
    }
}

impl<const N: usize> PartialEq for InlineBytes<N> {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

impl<const N: usize> Eq for InlineBytes<N> {}

impl<const N: usize> PartialOrd for InlineBytes<N> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// In the order of the bytes held, as the backend orders keys.
impl<const N: usize> Ord for InlineBytes<N> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self[..].cmp(&other[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_what_it_was_given_in_place_or_not() {
        let mut held = InlineBytes::<4>::from_slice(b"abc");
        assert!(matches!(held, InlineBytes::Inline { .. }));
        assert_eq!(&held[..], b"abc");
        held.set(b"wxyz");
        assert_eq!((&held[..], matches!(held, InlineBytes::Inline { .. })), (&b"wxyz"[..], true));
        held.set(b"longer");
        assert_eq!((&held[..], matches!(held, InlineBytes::Heap(_))), (&b"longer"[..], true));
        held.set(b"sixsix");
        assert_eq!(&held[..], b"sixsix");
        held.set(b"");
        assert_eq!((&held[..], matches!(held, InlineBytes::Inline { .. })), (&b""[..], true));
    }

    #[test]
    fn a_key_and_a_value_take_what_their_bucket_has_room_for() {
        assert_eq!(std::mem::size_of::<InlineBytes<62>>(), 64);
        assert_eq!(std::mem::size_of::<Option<InlineBytes<22>>>(), 24);
    }
}
