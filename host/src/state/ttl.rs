//! Time to live of state values, and how values are stored.
//!
//! Every stored value starts with a one-byte header: `0` means the value
//! never expires; `1` is followed by the expiry time (ms of processing
//! time since the epoch, `i64` big-endian). Reads treat an expired value as
//! absent; RocksDB's compaction filter ([`is_expired`]) purges them in the
//! background.

use super::StateError;

const NEVER: u8 = 0;
const EXPIRES: u8 = 1;

/// Which accesses renew a value's time to live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TtlUpdate {
    /// Creating or writing renews it.
    OnCreateAndWrite,
    /// Reading renews it too.
    OnReadAndWrite,
}

/// A time to live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ttl {
    /// Lifetime in milliseconds of processing time.
    pub millis: u64,
    /// Which accesses renew it.
    pub update: TtlUpdate,
}

impl Ttl {
    /// When a value written (or renewed) at `now` expires.
    pub fn expiry(&self, now: i64) -> i64 {
        now.saturating_add(i64::try_from(self.millis).unwrap_or(i64::MAX))
    }
}

/// Append the stored form of `value` to `out`.
pub fn encode_into(out: &mut Vec<u8>, value: &[u8], expires_at: Option<i64>) {
    match expires_at {
        None => out.push(NEVER),
        Some(at) => {
            out.push(EXPIRES);
            out.extend_from_slice(&at.to_be_bytes());
        }
    }
    out.extend_from_slice(value);
}

/// The stored form of `value`.
pub fn encode(value: &[u8], expires_at: Option<i64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 9);
    encode_into(&mut out, value, expires_at);
    out
}

/// The value inside `stored`, or `None` if it has expired at `now`.
pub fn decode(stored: &[u8], now: i64) -> Result<Option<&[u8]>, StateError> {
    match stored.split_first() {
        Some((&NEVER, value)) => Ok(Some(value)),
        Some((&EXPIRES, rest)) => {
            let (at, value) = rest
                .split_first_chunk::<8>()
                .ok_or_else(|| StateError::Corrupt("truncated expiry".into()))?;
            Ok((i64::from_be_bytes(*at) > now).then_some(value))
        }
        _ => Err(StateError::Corrupt("unknown value header".into())),
    }
}

/// Whether a stored value has expired at `now` (false for anything
/// unreadable, which is kept).
pub fn is_expired(stored: &[u8], now: i64) -> bool {
    matches!(decode(stored, now), Ok(None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_expire_at_their_expiry() {
        let forever = encode(b"v", None);
        assert_eq!(decode(&forever, i64::MAX).unwrap(), Some(&b"v"[..]));
        let ttl = Ttl { millis: 100, update: TtlUpdate::OnCreateAndWrite };
        let mortal = encode(b"v", Some(ttl.expiry(1_000)));
        assert_eq!(decode(&mortal, 1_099).unwrap(), Some(&b"v"[..]));
        assert_eq!(decode(&mortal, 1_100).unwrap(), None);
        assert!(is_expired(&mortal, 2_000) && !is_expired(&forever, 2_000));
        assert!(decode(&[7], 0).is_err() && decode(&[1, 0], 0).is_err() && !is_expired(&[7], 0));
    }
}
