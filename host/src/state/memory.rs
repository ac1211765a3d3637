//! An in-memory state backend for unit tests and embedded use.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::{prefix_end, KeyedStateBackend, ScanEntry, StateError, Write};

/// Keyed state in a `BTreeMap`; lost when dropped.
#[derive(Debug, Default)]
pub struct InMemoryBackend {
    entries: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl InMemoryBackend {
    /// An empty backend.
    pub fn new() -> Self {
        Self::default()
    }
}

impl KeyedStateBackend for InMemoryBackend {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        Ok(self.entries.get(key).cloned())
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), StateError> {
        self.entries.insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn delete(&mut self, key: &[u8]) -> Result<(), StateError> {
        self.entries.remove(key);
        Ok(())
    }

    fn scan(
        &mut self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<ScanEntry>, StateError> {
        let lower = match start_after {
            Some(after) => Bound::Excluded([prefix, after].concat()),
            None => Bound::Included(prefix.to_vec()),
        };
        let upper = prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded);
        Ok(self
            .entries
            .range((lower, upper))
            .take(limit)
            .map(|(k, v)| (k[prefix.len()..].to_vec(), v.clone()))
            .collect())
    }

    fn delete_prefix(&mut self, prefix: &[u8]) -> Result<(), StateError> {
        let doomed: Vec<Vec<u8>> = self
            .entries
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, _)| k.clone())
            .collect();
        for key in doomed {
            self.entries.remove(&key);
        }
        Ok(())
    }

    fn write_batch(
        &mut self,
        writes: &mut dyn Iterator<Item = Write<'_>>,
    ) -> Result<(), StateError> {
        for (key, value) in writes {
            match value {
                Some(value) => self.entries.insert(key.to_vec(), value.to_vec()),
                None => self.entries.remove(key),
            };
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StateError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn behaves_like_a_backend() {
        super::super::tests::exercise(&mut super::InMemoryBackend::new());
    }
}
