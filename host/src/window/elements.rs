//! How a window process function's elements are kept: each event encoded
//! as a self-delimiting record, appended to the window's value. Because
//! records delimit themselves, appending encodings (adding events, merging
//! sessions) is the encoding of the concatenated lists.
//!
//! Record: `[timestamp i64 BE][key: 0 | 1 + len u32 BE + bytes]`
//! `[value len u32 BE + bytes][header count u32 BE]([name len u32][name][value len u32][value])*`.

use crate::state::StateError;
use crate::Event;

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// Append the records of `events` to `out`.
pub fn encode_into(out: &mut Vec<u8>, events: &[Event]) {
    for event in events {
        out.extend_from_slice(&event.timestamp.to_be_bytes());
        match &event.key {
            Some(key) => {
                out.push(1);
                put_bytes(out, key);
            }
            None => out.push(0),
        }
        put_bytes(out, &event.value);
        out.extend_from_slice(&(event.headers.len() as u32).to_be_bytes());
        for (name, value) in &event.headers {
            put_bytes(out, name.as_bytes());
            put_bytes(out, value);
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], StateError> {
        let (head, rest) = self
            .0
            .split_at_checked(n)
            .ok_or_else(|| StateError::Corrupt("truncated window elements".into()))?;
        self.0 = rest;
        Ok(head)
    }
    fn u32(&mut self) -> Result<usize, StateError> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().map_err(|_| StateError::Corrupt("bad length".into()))?,
        ) as usize)
    }
    fn bytes(&mut self) -> Result<Vec<u8>, StateError> {
        let len = self.u32()?;
        Ok(self.take(len)?.to_vec())
    }
}

/// Decode every record in `bytes`.
pub fn decode(bytes: &[u8]) -> Result<Vec<Event>, StateError> {
    let mut reader = Reader(bytes);
    let mut events = Vec::new();
    while !reader.0.is_empty() {
        let timestamp = i64::from_be_bytes(
            reader.take(8)?.try_into().map_err(|_| StateError::Corrupt("bad timestamp".into()))?,
        );
        let key = match reader.take(1)?[0] {
            0 => None,
            _ => Some(reader.bytes()?),
        };
        let value = reader.bytes()?;
        let count = reader.u32()?;
        let mut headers = Vec::with_capacity(count.min(64));
        for _ in 0..count {
            let name = String::from_utf8(reader.bytes()?)
                .map_err(|_| StateError::Corrupt("header name is not UTF-8".into()))?;
            headers.push((name, reader.bytes()?));
        }
        events.push(Event { key, value, timestamp, headers });
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_concatenate_and_round_trip() {
        let a = Event {
            key: Some(b"k".to_vec()),
            value: b"v1".to_vec(),
            timestamp: -5,
            headers: vec![("h".into(), b"x".to_vec())],
        };
        let b = Event { key: None, value: Vec::new(), timestamp: 7, headers: vec![] };
        let mut first = Vec::new();
        encode_into(&mut first, std::slice::from_ref(&a));
        let mut second = Vec::new();
        encode_into(&mut second, std::slice::from_ref(&b));
        let both = decode(&[first.clone(), second].concat()).unwrap();
        assert_eq!(both.len(), 2);
        assert_eq!(
            (both[0].timestamp, both[0].key.clone(), both[0].headers.clone()),
            (-5, Some(b"k".to_vec()), a.headers.clone())
        );
        assert_eq!((both[1].timestamp, both[1].key.clone(), both[1].value.len()), (7, None, 0));
        assert!(decode(&first[..first.len() - 1]).is_err());
    }
}
