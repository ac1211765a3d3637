//! A function that misbehaves on request, for the host's isolation tests.
//!
//! Input: JSON lines `{"customer":"c1","act":"ok"}`; `act` is optional and
//! defaults to `"ok"`. Key: the customer string's bytes. State: a
//! `ValueState<u64>` called `"count"` per customer.
//!
//! The key function obeys the acts meant for it and keys everything else
//! by customer:
//!
//! | act | key function |
//! |---|---|
//! | `key-trap` | panics (a trap) |
//! | `key-loop` | loops forever |
//! | `key-huge` | returns a 4 MiB key |
//!
//! For every event the process function first counts it and writes the
//! count (`count += 1`, then `set`), so a host that rolls back a failed
//! call can be seen to do so, and only then acts:
//!
//! | act | process function |
//! |---|---|
//! | `ok` (and the `key-*` acts) | emits `{"customer":"c1","count":N}` at the event's timestamp |
//! | `fail` | returns the error `asked to fail` |
//! | `trap` | panics with `asked to trap` |
//! | `loop` | loops forever |
//! | `alloc` | allocates 1 MiB blocks (filled with `0xA5`) forever, never freeing one |
//! | `huge-state` | writes a 17 MiB value to the value state `"huge"` (over the host's 16 MiB limit) and returns the host's error |
//! | `bad-handle` | calls `value-state.get` on a handle that was never created (the host must trap) |
//! | `bad-key` | calls `select-key(u32::MAX)` and returns the host's error |
//! | `huge-name` | opens a value state with a 1 MiB name, reads and writes it, and returns the error |
//! | `emit-flood` | calls the unbuffered `context.emit` with a 1 KiB event forever |
//! | `bad-batch` | calls `context.emit-batch` with a value end past the end of `values` (the host must trap) |
//! | anything else | returns the error `unknown act "…"` |
//!
//! Where the host is expected to trap but returns instead, the function
//! returns an error saying what the host let through. Error messages are
//! cut to [`MAX_MESSAGE`] bytes, so an error echoing a huge name stays small.

use serde::{Deserialize, Serialize};
use weir_sdk::__private::wit::{context, state, types};
use weir_sdk::{function, Context, Error, Event, KeyFunction, ProcessFunction, ValueState};

/// Size of the key returned for `key-huge`.
pub const HUGE_KEY_BYTES: usize = 4 << 20;

/// Size of the value stored for `huge-state`: 1 MiB over the host's limit.
pub const HUGE_STATE_BYTES: usize = 17 << 20;

/// Length of the state name used for `huge-name`.
pub const HUGE_NAME_BYTES: usize = 1 << 20;

/// Size of each block `alloc` keeps.
pub const ALLOC_BLOCK_BYTES: usize = 1 << 20;

/// Size of each event `emit-flood` sends.
pub const FLOOD_EVENT_BYTES: usize = 1 << 10;

/// The handle `bad-handle` uses: never returned by the host.
pub const BAD_HANDLE: u32 = 0x7fff_0001;

/// Longest error message the function returns, in bytes.
pub const MAX_MESSAGE: usize = 200;

/// One input event.
#[derive(Deserialize)]
struct Input {
    customer: String,
    #[serde(default = "ok")]
    act: String,
}

fn ok() -> String {
    "ok".to_string()
}

impl Input {
    fn parse(event: &Event) -> Result<Self, Error> {
        event.json()
    }
}

/// The output of an `ok` event.
#[derive(Serialize)]
struct Counted<'a> {
    customer: &'a str,
    count: u64,
}

/// The function: counts each customer's events, then does as told.
pub struct Misbehaving {
    count: ValueState<u64>,
}

impl Default for Misbehaving {
    fn default() -> Self {
        Self { count: ValueState::new("count") }
    }
}

#[function]
impl KeyFunction for Misbehaving {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        let input = Input::parse(event)?;
        match input.act.as_str() {
            "key-trap" => panic!("asked to trap in the key function"),
            "key-loop" => spin(),
            "key-huge" => Ok(vec![b'k'; HUGE_KEY_BYTES]),
            _ => Ok(input.customer.into_bytes()),
        }
    }
}

#[function]
impl ProcessFunction for Misbehaving {
    fn process(&mut self, _key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
        let mut count = self.count.get()?.unwrap_or(0);
        for event in events {
            let input = Input::parse(event)?;
            count += 1;
            // Written before misbehaving, so the host's rollback shows.
            self.count.set(&count)?;
            match input.act.as_str() {
                "ok" | "key-trap" | "key-loop" | "key-huge" => {
                    ctx.emit(Event::from_json(
                        &Counted { customer: &input.customer, count },
                        event.timestamp,
                    )?);
                }
                "fail" => return Err(Error::msg("asked to fail")),
                "trap" => panic!("asked to trap"),
                "loop" => spin(),
                "alloc" => hoard(),
                "huge-state" => return huge_state(),
                "bad-handle" => return bad_handle(),
                "bad-key" => return bad_key(),
                "huge-name" => return huge_name(),
                "emit-flood" => emit_flood(),
                "bad-batch" => return bad_batch(),
                other => return Err(bounded(Error::msg(format!("unknown act {other:?}")))),
            }
        }
        Ok(())
    }
}

/// Loop forever, in a way the optimiser cannot remove.
fn spin() -> ! {
    let mut n = 0u64;
    loop {
        n = std::hint::black_box(n.wrapping_add(1));
    }
}

/// Allocate 1 MiB blocks forever, touching every byte and keeping them all.
fn hoard() -> ! {
    let mut kept: Vec<Vec<u8>> = Vec::new();
    loop {
        kept.push(vec![0xA5; ALLOC_BLOCK_BYTES]);
        std::hint::black_box(&mut kept);
    }
}

/// Store a value larger than the host allows, through the raw binding (so
/// the guest holds the value once, not also an encoded copy).
fn huge_state() -> Result<(), Error> {
    let huge =
        state::ValueState::open("huge", None).map_err(|e| state_error("open \"huge\"", e))?;
    huge.set(&vec![0x5A; HUGE_STATE_BYTES]).map_err(|e| state_error("set a 17 MiB value", e))?;
    Err(Error::msg("the host accepted a 17 MiB state value"))
}

/// Use a value-state handle the host never created.
#[allow(unsafe_code)]
fn bad_handle() -> Result<(), Error> {
    // SAFETY: deliberately unsound: `BAD_HANDLE` was never returned by the
    // host, which this function exists to check: calling through it must
    // trap. Nothing in the guest relies on the handle being valid.
    let bogus = unsafe { state::ValueState::from_handle(BAD_HANDLE) };
    let result = bogus.get();
    // Dropping it would make a second call with the bogus handle.
    std::mem::forget(bogus);
    result.map_err(|e| state_error("value-state.get on a bogus handle", e))?;
    Err(Error::msg(format!(
        "the host accepted value-state handle {BAD_HANDLE:#x}, which it never created"
    )))
}

/// Select a key index that no batch has.
fn bad_key() -> Result<(), Error> {
    state::select_key(u32::MAX).map_err(|e| state_error("select-key(u32::MAX)", e))?;
    Err(Error::msg("the host accepted select-key(u32::MAX)"))
}

/// Open, read and write a value state with a 1 MiB name.
fn huge_name() -> Result<(), Error> {
    let name = "n".repeat(HUGE_NAME_BYTES);
    let huge = ValueState::<u64>::new(&name);
    let touched = huge.get().and_then(|_| huge.set(&1));
    touched.map_err(bounded)?;
    Err(Error::msg("the host accepted a state name of 1 MiB"))
}

/// Emit 1 KiB events one host call at a time, forever.
fn emit_flood() -> ! {
    let event = Event::new(vec![b'f'; FLOOD_EVENT_BYTES], 0);
    loop {
        context::emit(&event);
    }
}

/// Hand the host a batch whose one value ends past the end of `values`.
fn bad_batch() -> Result<(), Error> {
    let batch = types::EventBatch {
        values: vec![b'x'; 16],
        value_ends: vec![1 << 20],
        timestamps: vec![0],
        keyed: Vec::new(),
        keys: Vec::new(),
        key_ends: Vec::new(),
        headers: Vec::new(),
    };
    context::emit_batch(&batch);
    Err(Error::msg("the host accepted an event batch whose value ends past its values"))
}

/// A raw state error as an [`Error`] saying what was attempted.
fn state_error(what: &str, error: state::StateError) -> Error {
    let why = match error {
        state::StateError::InvalidName(name) => {
            format!("invalid state name of {} bytes", name.len())
        }
        state::StateError::InvalidTtl => "invalid time to live".to_string(),
        state::StateError::TooLarge(limit) => {
            format!("larger than the host's limit of {limit} bytes")
        }
        state::StateError::NoCurrentKey => "no current key".to_string(),
        state::StateError::UnknownKey(index) => {
            format!("key index {index} is not in the current batch")
        }
        state::StateError::Backend(message) => format!("state backend: {message}"),
    };
    bounded(Error::msg(format!("{what}: {why}")))
}

/// `error` with its message cut to [`MAX_MESSAGE`] bytes.
fn bounded(error: Error) -> Error {
    let message = error.message();
    if message.len() <= MAX_MESSAGE {
        return error;
    }
    let mut end = MAX_MESSAGE;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    Error::msg(format!("{}… ({} bytes)", &message[..end], message.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    fn event(customer: &str, act: Option<&str>, timestamp: i64) -> Event {
        let value = match act {
            Some(act) => format!(r#"{{"customer":"{customer}","act":"{act}"}}"#),
            None => format!(r#"{{"customer":"{customer}"}}"#),
        };
        Event::new(value.into_bytes(), timestamp)
    }

    #[test]
    fn keys_by_customer_and_obeys_key_acts() {
        let mut harness = Harness::<Misbehaving>::new();
        assert_eq!(harness.key(&event("c1", None, 0)).unwrap(), b"c1");
        assert_eq!(harness.key(&event("c1", Some("fail"), 0)).unwrap(), b"c1");
        assert_eq!(harness.key(&event("c1", Some("key-huge"), 0)).unwrap().len(), HUGE_KEY_BYTES);
        assert!(harness.key(&Event::new(b"{}".to_vec(), 0)).is_err());
    }

    #[test]
    #[should_panic(expected = "asked to trap in the key function")]
    fn key_trap_panics() {
        let _ = Harness::<Misbehaving>::new().key(&event("c1", Some("key-trap"), 0));
    }

    #[test]
    fn ok_counts_per_customer() {
        let mut harness = Harness::<Misbehaving>::new();
        let out =
            harness.process(b"c1", vec![event("c1", None, 5), event("c1", Some("ok"), 6)]).unwrap();
        let texts: Vec<String> =
            out.iter().map(|e| String::from_utf8(e.value.clone()).unwrap()).collect();
        assert_eq!(texts, [r#"{"customer":"c1","count":1}"#, r#"{"customer":"c1","count":2}"#]);
        assert_eq!(out.iter().map(|e| e.timestamp).collect::<Vec<_>>(), [5, 6]);
        harness.process(b"c2", vec![event("c2", None, 7)]).unwrap();
        let out = harness.process(b"c1", vec![event("c1", None, 8)]).unwrap();
        assert_eq!(out[0].json::<serde_json::Value>().unwrap()["count"], 3);
        assert_eq!(harness.value::<u64>(b"c1", "count"), Some(3));
        assert_eq!(harness.value::<u64>(b"c2", "count"), Some(1));
    }

    #[test]
    fn fail_returns_an_error_after_writing_the_count() {
        let mut harness = Harness::<Misbehaving>::new();
        let error = harness
            .process(b"c1", vec![event("c1", None, 0), event("c1", Some("fail"), 0)])
            .unwrap_err();
        assert_eq!(error.message(), "asked to fail");
        // The in-memory host does not roll back; the real one must.
        assert_eq!(harness.value::<u64>(b"c1", "count"), Some(2));
    }

    #[test]
    #[should_panic(expected = "asked to trap")]
    fn trap_panics() {
        let _ = Harness::<Misbehaving>::new().process(b"c1", vec![event("c1", Some("trap"), 0)]);
    }

    #[test]
    fn huge_name_returns_a_short_error() {
        let mut harness = Harness::<Misbehaving>::new();
        let error = harness.process(b"c1", vec![event("c1", Some("huge-name"), 0)]).unwrap_err();
        assert!(error.message().contains("invalid state name"), "{error}");
        assert!(error.message().len() < MAX_MESSAGE + 32, "{} bytes", error.message().len());
    }

    #[test]
    fn unknown_acts_are_named_in_the_error() {
        let mut harness = Harness::<Misbehaving>::new();
        let error = harness.process(b"c1", vec![event("c1", Some("dance"), 0)]).unwrap_err();
        assert_eq!(error.message(), r#"unknown act "dance""#);
    }

    #[test]
    fn key_acts_count_like_ok_in_process() {
        let mut harness = Harness::<Misbehaving>::new();
        let out = harness.process(b"c1", vec![event("c1", Some("key-huge"), 0)]).unwrap();
        assert_eq!(out[0].value, br#"{"customer":"c1","count":1}"#);
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let error = bounded(Error::msg("é".repeat(MAX_MESSAGE)));
        assert!(error.message().starts_with("éé"));
        assert!(error.message().ends_with(&format!("({} bytes)", 2 * MAX_MESSAGE)));
    }
}
