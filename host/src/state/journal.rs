//! A backend wrapper that can undo recent writes: what lets a pipeline
//! with a dead-letter output take back everything a failed call did to its
//! state before it goes on, and lets the host re-run a failed batch to
//! find the key at fault without leaving a trace. It records only between
//! a [`mark`](KeyedStateBackend::mark) and an
//! [`unmark`](KeyedStateBackend::unmark); otherwise writes pass straight
//! through.

use super::{KeyedStateBackend, ScanEntry, SnapshotForm, StateError, Write};

/// Wraps a backend and remembers, since the last [`mark`](KeyedStateBackend::mark),
/// the value each write replaced, so [`roll_back`](KeyedStateBackend::roll_back)
/// can restore them.
pub struct JournaledBackend {
    inner: Box<dyn KeyedStateBackend>,
    /// (key, value before the write), oldest first.
    undo: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Whether writes are being recorded.
    recording: bool,
}

impl JournaledBackend {
    /// Journal the writes to `inner`.
    pub fn new(inner: Box<dyn KeyedStateBackend>) -> Self {
        Self { inner, undo: Vec::new(), recording: false }
    }

    fn remember(&mut self, key: &[u8]) -> Result<(), StateError> {
        if !self.recording {
            return Ok(());
        }
        let before = self.inner.get(key)?;
        self.undo.push((key.to_vec(), before));
        Ok(())
    }

    /// Collect `writes`, remembering the value under each one's key (its
    /// `key`) before any of them is applied.
    fn remember_all<W>(
        &mut self,
        writes: &mut dyn Iterator<Item = W>,
        key: impl Fn(&W) -> &[u8],
    ) -> Result<Vec<W>, StateError> {
        let writes: Vec<W> = writes.collect();
        for write in &writes {
            self.remember(key(write))?;
        }
        Ok(writes)
    }
}

impl KeyedStateBackend for JournaledBackend {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        self.inner.get(key)
    }

    fn stats(&self) -> super::StateStats {
        self.inner.stats()
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, StateError> {
        self.inner.get_into(key, out)
    }

    fn prefetch(&self, key: &[u8]) -> super::Prefetched {
        self.inner.prefetch(key)
    }

    fn get_prefetched_into(
        &self,
        key: &[u8],
        prefetched: super::Prefetched,
        out: &mut Vec<u8>,
    ) -> Result<bool, StateError> {
        self.inner.get_prefetched_into(key, prefetched, out)
    }

    fn get_many_into(&self, batch: super::ReadBatch<'_, '_>) -> Result<(), StateError> {
        self.inner.get_many_into(batch)
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), StateError> {
        self.remember(key)?;
        self.inner.put(key, value)
    }

    fn insert_new(&mut self, key: &[u8], value: &[u8]) -> Result<(), StateError> {
        self.remember(key)?;
        self.inner.insert_new(key, value)
    }

    fn delete(&mut self, key: &[u8]) -> Result<(), StateError> {
        self.remember(key)?;
        self.inner.delete(key)
    }

    fn scan(
        &mut self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<ScanEntry>, StateError> {
        self.inner.scan(prefix, start_after, limit)
    }

    fn delete_prefix(&mut self, prefix: &[u8]) -> Result<(), StateError> {
        let mut after: Option<Vec<u8>> = None;
        while self.recording {
            let page = self.inner.scan(prefix, after.as_deref(), 1024)?;
            let full = page.len() == 1024;
            for (rest, value) in &page {
                self.undo.push(([prefix, rest].concat(), Some(value.clone())));
            }
            match page.into_iter().last() {
                Some((rest, _)) if full => after = Some(rest),
                _ => break,
            }
        }
        self.inner.delete_prefix(prefix)
    }

    fn write_batch(
        &mut self,
        writes: &mut dyn Iterator<Item = Write<'_>>,
    ) -> Result<(), StateError> {
        if !self.recording {
            return self.inner.write_batch(writes);
        }
        let writes = self.remember_all(writes, |(key, _)| key)?;
        self.inner.write_batch(&mut writes.into_iter())
    }

    fn write_batch_prefetched(
        &mut self,
        writes: &mut dyn Iterator<Item = (Write<'_>, Option<super::Prefetched>)>,
    ) -> Result<(), StateError> {
        if !self.recording {
            return self.inner.write_batch_prefetched(writes);
        }
        let writes = self.remember_all(writes, |((key, _), _)| key)?;
        self.inner.write_batch_prefetched(&mut writes.into_iter())
    }

    fn flush(&mut self) -> Result<(), StateError> {
        self.inner.flush()
    }

    fn checkpoint(&mut self, dir: &std::path::Path, form: SnapshotForm) -> Result<(), StateError> {
        self.inner.checkpoint(dir, form)
    }

    fn relieve(&mut self) -> Result<(), StateError> {
        self.inner.relieve()
    }

    fn mark(&mut self) {
        self.undo.clear();
        self.recording = true;
    }

    fn unmark(&mut self) {
        self.undo.clear();
        self.recording = false;
    }

    fn roll_back(&mut self) -> Result<(), StateError> {
        while let Some((key, before)) = self.undo.pop() {
            match before {
                Some(value) => self.inner.put(&key, &value)?,
                None => self.inner.delete(&key)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::InMemoryBackend;

    fn journaled() -> JournaledBackend {
        JournaledBackend::new(Box::new(InMemoryBackend::new()))
    }

    #[test]
    fn behaves_like_the_backend_it_wraps() {
        crate::state::tests::exercise(&mut journaled());
    }

    #[test]
    fn rolls_back_to_the_mark() {
        let mut state = journaled();
        state.put(b"a", b"1").unwrap();
        state.put(b"p/x", b"x").unwrap();
        state.put(b"p/y", b"y").unwrap();
        state.mark();
        state.put(b"a", b"2").unwrap();
        state.put(b"a", b"3").unwrap();
        state.put(b"b", b"new").unwrap();
        state.delete_prefix(b"p/").unwrap();
        state
            .write_batch(&mut [(&b"c"[..], Some(&b"c"[..])), (&b"p/x"[..], None)].into_iter())
            .unwrap();
        state.roll_back().unwrap();
        assert_eq!(state.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(state.get(b"b").unwrap(), None);
        assert_eq!(state.get(b"c").unwrap(), None);
        assert_eq!(
            state.scan(b"p/", None, 10).unwrap(),
            vec![(b"x".to_vec(), b"x".to_vec()), (b"y".to_vec(), b"y".to_vec())]
        );
        state.mark();
        state.roll_back().unwrap();
        assert_eq!(
            state.get(b"a").unwrap().as_deref(),
            Some(&b"1"[..]),
            "nothing to undo after a new mark"
        );
        state.unmark();
        state.put(b"a", b"unrecorded").unwrap();
        state.roll_back().unwrap();
        assert_eq!(
            state.get(b"a").unwrap().as_deref(),
            Some(&b"unrecorded"[..]),
            "writes after unmark are not recorded"
        );
    }
}
