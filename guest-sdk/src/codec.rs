//! The compact binary encoding of typed state: `postcard` over `serde`.
//!
//! Integers are varints and there is no field naming, so a `u64` counter
//! takes one to ten bytes. Changing a state type's shape changes its
//! encoding: add fields only at the end, as `Option`s, to stay readable.

use serde::{de::DeserializeOwned, Serialize};

use crate::Error;

/// Encode `value` for storage in state.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Error> {
    postcard::to_allocvec(value).map_err(|e| Error::msg(format!("cannot encode state value: {e}")))
}

/// Encode `value` for storage in state, appended to `out`.
pub fn encode_into<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result<(), Error> {
    *out = postcard::to_extend(value, std::mem::take(out))
        .map_err(|e| Error::msg(format!("cannot encode state value: {e}")))?;
    Ok(())
}

/// Decode a value that [`encode`] produced.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    postcard::from_bytes(bytes).map_err(|e| Error::msg(format!("cannot decode state value: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_is_compact() {
        let bytes = encode(&300u64).unwrap();
        assert_eq!(bytes.len(), 2);
        assert_eq!(decode::<u64>(&bytes).unwrap(), 300);
        let pair = (String::from("c1"), -5i64);
        assert_eq!(decode::<(String, i64)>(&encode(&pair).unwrap()).unwrap(), pair);
        let mut out = vec![9];
        encode_into(&300u64, &mut out).unwrap();
        assert_eq!(out, [&[9][..], &encode(&300u64).unwrap()].concat());
    }

    #[test]
    fn decoding_garbage_is_an_error() {
        assert!(decode::<String>(&[0xff, 0xff, 0xff]).is_err());
    }
}
