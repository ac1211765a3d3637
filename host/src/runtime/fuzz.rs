//! Drives the host side of the WIT interfaces with arbitrary call
//! sequences, as a hostile guest could: random handles (never created,
//! dropped, of the wrong kind), out-of-range key indices, huge and empty
//! names and values, malformed packed batches, marks and roll-backs in any
//! order. Every call must return (an error, or a trap for the guest) and
//! never panic; a roll-back must restore exactly the state at its mark.
//!
//! It is not part of the production library: it is compiled for the
//! host's own tests, whose seeded test below runs it on every `cargo test`,
//! and with the `fuzz` feature, which the cargo-fuzz crate (`fuzz/`)
//! enables to call [`host_api_calls`] directly:
//! `fuzz_target!(|data: &[u8]| weir_host::runtime::fuzz::host_api_calls(data));`.

use wasmtime::component::Resource;

use super::bindings::weir::function::context::Host as _;
use super::bindings::weir::function::state::{
    self, Host as _, HostListState, HostMapState, HostValueState,
};
use super::bindings::weir::function::timers::Host as _;
use super::bindings::weir::function::types::{EventBatch, TimeDomain};
use super::host::state::MAX_VALUE_LEN;
use super::host::{HostCtx, ListStateHandle, MapStateHandle, ValueStateHandle};
use crate::state::{InMemoryBackend, JournaledBackend, KeyedStateBackend};
use crate::Event;

/// Reads the fuzzer's bytes as numbers and byte strings; zeros when they
/// run out.
struct Input<'a> {
    bytes: &'a [u8],
}

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let (&first, rest) = self.bytes.split_first().unwrap_or((&0, &[]));
        self.bytes = rest;
        first
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Mostly small byte strings; sometimes just over the host's limits.
    fn bytes(&mut self) -> Vec<u8> {
        match self.byte() {
            250 => vec![7; MAX_VALUE_LEN + 1],
            251 => vec![b'n'; 1 << 16],
            len => (0..len % 24).map(|_| self.byte()).collect(),
        }
    }

    fn text(&mut self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }

    fn ttl(&mut self) -> Option<state::Ttl> {
        match self.byte() % 3 {
            0 => None,
            1 => Some(state::Ttl {
                millis: u64::from(self.byte()),
                update: state::TtlUpdate::OnCreateAndWrite,
            }),
            _ => Some(state::Ttl {
                millis: u64::from(self.u32()),
                update: state::TtlUpdate::OnReadAndWrite,
            }),
        }
    }

    /// A handle the guest might pass: one it opened, or any number.
    fn handle<T: 'static>(&mut self, opened: &[u32]) -> Resource<T> {
        let rep = match self.byte() % 4 {
            0 => self.u32(),
            _ if opened.is_empty() => self.u32(),
            _ => opened[usize::from(self.byte()) % opened.len()],
        };
        Resource::new_borrow(rep)
    }

    fn domain(&mut self) -> TimeDomain {
        if self.byte().is_multiple_of(2) {
            TimeDomain::EventTime
        } else {
            TimeDomain::ProcessingTime
        }
    }

    /// Value cells whose lists need not agree with each other or `count`.
    fn batch_cells(&mut self, count: usize) -> super::bindings::weir::function::types::ValueCells {
        let count = count + usize::from(self.byte() % 2);
        super::bindings::weir::function::types::ValueCells {
            states: Vec::new(),
            present: (0..count).map(|_| self.byte().is_multiple_of(2)).collect(),
            values: self.bytes(),
            ends: (0..count).map(|_| self.u32() % 32).collect(),
        }
    }

    /// A packed batch whose lists need not agree with each other.
    fn batch(&mut self) -> EventBatch {
        let count = usize::from(self.byte() % 6);
        EventBatch {
            values: self.bytes(),
            value_ends: (0..count).map(|_| self.u32() % 64).collect(),
            timestamps: (0..usize::from(self.byte() % 6)).map(|_| i64::from(self.u32())).collect(),
            keyed: (0..usize::from(self.byte() % 3)).map(|_| self.u32() % 8).collect(),
            keys: self.bytes(),
            key_ends: (0..usize::from(self.byte() % 3)).map(|_| self.u32() % 32).collect(),
            headers: (0..usize::from(self.byte() % 3))
                .map(|_| (self.u32() % 8, self.text(), self.bytes()))
                .collect(),
        }
    }
}

/// Every entry of the context's state, for comparing before and after.
fn all_state(ctx: &mut HostCtx) -> Vec<(Vec<u8>, Vec<u8>)> {
    let backend = ctx.backend_mut().expect("the fuzzed context has state");
    backend.scan(b"", None, usize::MAX).expect("the in-memory backend cannot fail")
}

/// Interpret `data` as a sequence of host calls on a fresh context with
/// state. Panics only if the host misbehaves.
pub fn host_api_calls(data: &[u8]) {
    let backend: Box<dyn KeyedStateBackend> =
        Box::new(JournaledBackend::new(Box::new(InMemoryBackend::new())));
    let mut ctx = HostCtx::new("fuzzed", Some(backend), 128).with_clock(|| 1_000);
    let mut input = Input { bytes: data };
    let (mut values, mut maps, mut lists) = (Vec::new(), Vec::new(), Vec::new());
    let mut marked: Option<Vec<(Vec<u8>, Vec<u8>)>> = None;
    while !input.is_empty() {
        match input.byte() % 32 {
            0 => {
                let keys: Vec<Vec<u8>> = (0..input.byte() % 4).map(|_| input.bytes()).collect();
                ctx.begin_batch(keys.iter().map(Vec::as_slice));
            }
            1 => drop(ctx.state().select_key(input.u32() % 6)),
            2 => drop(ctx.state().select_key(input.u32())),
            3 => {
                let (name, ttl) = (input.text(), input.ttl());
                if let Ok(Ok(handle)) = HostValueState::open(&mut ctx.state(), name, ttl) {
                    values.push(handle.rep());
                }
            }
            4 => drop(HostValueState::get(
                &mut ctx.state(),
                input.handle::<ValueStateHandle>(&values),
            )),
            5 => {
                let handle = input.handle::<ValueStateHandle>(&values);
                drop(HostValueState::set(&mut ctx.state(), handle, input.bytes()));
            }
            6 => drop(HostValueState::clear(
                &mut ctx.state(),
                input.handle::<ValueStateHandle>(&values),
            )),
            7 => drop(HostValueState::drop(
                &mut ctx.state(),
                Resource::new_own(input.handle::<ValueStateHandle>(&values).rep()),
            )),
            8 => {
                let (name, ttl) = (input.text(), input.ttl());
                if let Ok(Ok(handle)) = HostMapState::open(&mut ctx.state(), name, ttl) {
                    maps.push(handle.rep());
                }
            }
            9 => {
                let handle = input.handle::<MapStateHandle>(&maps);
                drop(HostMapState::put(&mut ctx.state(), handle, input.bytes(), input.bytes()));
            }
            10 => {
                let handle = input.handle::<MapStateHandle>(&maps);
                drop(HostMapState::get(&mut ctx.state(), handle, input.bytes()));
            }
            11 => {
                let handle = input.handle::<MapStateHandle>(&maps);
                drop(HostMapState::remove(&mut ctx.state(), handle, input.bytes()));
            }
            12 => {
                let handle = input.handle::<MapStateHandle>(&maps);
                let start = if input.byte().is_multiple_of(2) { None } else { Some(input.bytes()) };
                drop(HostMapState::entries(&mut ctx.state(), handle, start, input.u32()));
            }
            13 => drop(HostMapState::is_empty(
                &mut ctx.state(),
                input.handle::<MapStateHandle>(&maps),
            )),
            14 => {
                drop(HostMapState::clear(&mut ctx.state(), input.handle::<MapStateHandle>(&maps)))
            }
            15 => {
                let handle = input.handle::<MapStateHandle>(&maps);
                drop(HostMapState::contains(&mut ctx.state(), handle, input.bytes()));
            }
            16 => {
                let (name, ttl) = (input.text(), input.ttl());
                if let Ok(Ok(handle)) = HostListState::open(&mut ctx.state(), name, ttl) {
                    lists.push(handle.rep());
                }
            }
            17 => {
                let handle = input.handle::<ListStateHandle>(&lists);
                drop(HostListState::add(&mut ctx.state(), handle, input.bytes()));
            }
            18 => {
                let handle = input.handle::<ListStateHandle>(&lists);
                let values = (0..input.byte() % 4).map(|_| input.bytes()).collect();
                drop(HostListState::add_all(&mut ctx.state(), handle, values));
            }
            19 => {
                drop(HostListState::get(&mut ctx.state(), input.handle::<ListStateHandle>(&lists)))
            }
            20 => {
                let handle = input.handle::<ListStateHandle>(&lists);
                let values = (0..input.byte() % 4).map(|_| input.bytes()).collect();
                drop(HostListState::update(&mut ctx.state(), handle, values));
            }
            21 => drop(HostListState::clear(
                &mut ctx.state(),
                input.handle::<ListStateHandle>(&lists),
            )),
            22 => {
                let (domain, timestamp) =
                    (input.domain(), i64::from(input.u32()) - i64::from(i32::MAX));
                drop(if input.byte().is_multiple_of(2) {
                    ctx.timers().register(domain, timestamp)
                } else {
                    ctx.timers().delete(domain, timestamp)
                });
            }
            23 => {
                let (domain, up_to) = (input.domain(), i64::from(input.u32()));
                drop(ctx.take_due_timers(domain, up_to));
            }
            24 => {
                let event = Event {
                    key: Some(input.bytes()),
                    value: input.bytes(),
                    timestamp: i64::from(input.u32()),
                    headers: vec![(input.text(), input.bytes())],
                };
                drop(ctx.context().emit(event));
            }
            25 => {
                let batch = input.batch();
                drop(ctx.context().emit_batch(batch));
            }
            26 => {
                let (name, value) = (input.text(), input.bytes());
                drop(
                    ctx.context().emit_to(
                        name,
                        Event { key: None, value, timestamp: 0, headers: Vec::new() },
                    ),
                );
            }
            27 if input.byte().is_multiple_of(2) => {
                let mut cells = super::packing::empty_cells();
                ctx.prefetch_values(&mut cells);
                let keys = cells.present.len().checked_div(cells.states.len()).unwrap_or(0);
                assert_eq!(
                    cells.present.len(),
                    cells.states.len() * keys,
                    "one cell per state and key"
                );
                assert_eq!(cells.ends.len(), cells.present.len());
            }
            27 => {
                let count = usize::from(input.byte() % 4);
                let cells: Vec<(u32, u32)> =
                    (0..count).map(|_| (input.u32() % 3, input.u32() % 5)).collect();
                let mut writes = input.batch_cells(count);
                writes.states = (0..input.byte() % 3).map(|_| input.text()).collect();
                drop(ctx.state().write_values(cells, writes));
            }
            31 => {
                ctx.mark();
                marked = Some(all_state(&mut ctx));
            }
            30 => {
                ctx.roll_back().expect("a journaled context can always roll back");
                if let Some(before) = marked.take() {
                    assert_eq!(
                        all_state(&mut ctx),
                        before,
                        "a roll-back restores the state at the mark"
                    );
                }
                ctx.mark();
                marked = Some(all_state(&mut ctx));
            }
            _ => {
                drop(ctx.context().current_watermark());
                drop(ctx.context().processing_time());
                ctx.end_batch();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift), so runs repeat.
    fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn arbitrary_call_sequences_never_panic_the_host() {
        for seed in 0..1500 {
            let data = random_bytes(seed, 1 + (seed as usize * 37) % 3000);
            let outcome = std::panic::catch_unwind(|| host_api_calls(&data));
            assert!(outcome.is_ok(), "seed {seed} panicked the host");
        }
    }

    #[test]
    fn hand_made_sequences_hit_the_edges() {
        // select a key before any batch, open with a 64 KiB name, use a
        // handle that was never made, roll back with nothing marked.
        host_api_calls(&[1, 0, 0, 0, 0, 3, 251, 4, 0, 1, 2, 3, 4, 28, 7, 0, 9, 9, 9, 9]);
        // a batch with one key, value state set to 16 MiB + 1, then read.
        host_api_calls(&[
            0, 1, 2, b'k', b'y', 1, 0, 0, 0, 0, 3, 1, b'v', 0, 27, 5, 1, 0, 250, 4, 1, 0, 28,
        ]);
    }
}
