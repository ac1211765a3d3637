//! The call in progress, shared by the interfaces: which function, the keys
//! of the batch passed to it, the key the guest selected, and the call's
//! processing time. `state` scopes its reads and writes to the selected
//! key, `timers` registers for it, `context` reports the processing time.

/// The function and the batch of the call in progress.
pub struct CallScope {
    /// The function's name, for errors and logs.
    pub(super) function: String,
    /// Key groups the keys hash to.
    max_parallelism: u16,
    /// The batch's keys, back to back, …
    key_bytes: Vec<u8>,
    /// … and where each key ends in it, with its key group.
    keys: Vec<(usize, u16)>,
    /// The key the guest selected (`state.select-key`), an index of `keys`.
    pub(super) selected: Option<usize>,
    /// Where processing time is read from (ms since the epoch).
    pub(super) clock: fn() -> i64,
    /// Processing time, fixed for the call.
    pub(super) processing_time: i64,
    /// Which call this is, counted from 1 ([`Self::begin`]): what the call
    /// read ahead is its own.
    number: u64,
}

impl CallScope {
    /// No call yet, for `function` with keys of `max_parallelism` key
    /// groups, reading processing time from `clock`.
    pub(super) fn new(function: &str, max_parallelism: u16, clock: fn() -> i64) -> Self {
        Self {
            function: function.to_string(),
            max_parallelism,
            key_bytes: Vec::new(),
            keys: Vec::new(),
            selected: None,
            clock,
            processing_time: 0,
            number: 0,
        }
    }

    /// Key groups the keys hash to.
    pub(super) fn max_parallelism(&self) -> u16 {
        self.max_parallelism
    }

    /// Record the keys of a batch (none selected) and fix processing time.
    pub(super) fn begin<'a>(&mut self, keys: impl Iterator<Item = &'a [u8]>) {
        self.keys.clear();
        self.key_bytes.clear();
        for key in keys {
            self.key_bytes.extend_from_slice(key);
            self.keys
                .push((self.key_bytes.len(), crate::state::key_group(key, self.max_parallelism)));
        }
        self.selected = None;
        self.processing_time = (self.clock)();
        self.number += 1;
    }

    /// Which call is in progress (or was last).
    pub(super) fn number(&self) -> u64 {
        self.number
    }

    /// Forget the batch once the call returned.
    pub(super) fn end(&mut self) {
        self.keys.clear();
        self.selected = None;
    }

    /// How many keys the batch has.
    pub(super) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Key `index` of the batch (below [`Self::len`]) and its key group.
    pub(super) fn key(&self, index: usize) -> (&[u8], u16) {
        let (end, group) = self.keys[index];
        let start = index.checked_sub(1).map_or(0, |previous| self.keys[previous].0);
        (&self.key_bytes[start..end], group)
    }

    /// What a call was doing, by the key it had selected:
    /// `while processing key "c1"` (long keys cut, bytes escaped).
    pub(super) fn describe_selected_key(&self) -> String {
        let keys = self.keys.len();
        let index = match self.selected {
            Some(index) if index < keys => Some(index),
            // The SDK selects keys lazily: a batch of one has only one.
            _ if keys == 1 => Some(0),
            _ => None,
        };
        match index {
            Some(index) => {
                let (key, _) = self.key(index);
                let shown: String = key
                    .iter()
                    .take(64)
                    .flat_map(|b| std::ascii::escape_default(*b))
                    .map(char::from)
                    .collect();
                let more = if key.len() > 64 {
                    format!("… ({} bytes)", key.len())
                } else {
                    String::new()
                };
                format!("while processing key \"{shown}\"{more}")
            }
            None => format!("while processing a batch of {keys} keys"),
        }
    }
}
