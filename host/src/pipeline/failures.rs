//! What happens when a function fails on a batch.
//!
//! Under the `fail` policy the pipeline stops; when the call trapped
//! before the SDK told the host its key (the SDK selects keys lazily, as
//! state is read ahead), [`pinpoint`] re-runs the batch one key at a time
//! on a new instance, with every effect undone, to name the key.
//!
//! Under `dead-letter` (`on_error: { dead-letter: NAME }`): functions take
//! batches, so when a call fails the host does not know
//! which event was at fault. It undoes the whole call — state writes
//! (through a [`JournaledBackend`](crate::state::JournaledBackend)), timer
//! changes and emitted events — replaces the instance if it trapped, and
//! calls the function again one event at a time (one timer key at a time).
//! An event it still fails on is undone the same way and sent to side
//! output NAME as a JSON record `{"error", "key", "timestamp", "value"}`
//! (see [`letter`]); the others are processed as usual. So an
//! offending event leaves no trace in state or output, and everything
//! else is processed exactly as if it had never been there.

use crate::runtime::bindings::weir::function::types::{KeyedEvents, KeyedTimers, TimeDomain};
use crate::runtime::packing::KeyList;
use crate::runtime::{CallError, KeyFunctionInstance, ProcessFunctionInstance};
use crate::Event;

use super::error::RunError;

/// Header naming why an event was dead-lettered.
pub const ERROR_HEADER: &str = "weir.error";
/// Header carrying the key the event was processed under.
pub const KEY_HEADER: &str = "weir.key";
/// Header carrying a failed timer's timestamp (decimal ms).
pub const TIMER_HEADER: &str = "weir.timer";

/// `event` as a dead letter: a JSON record of the error, the key it was
/// processed under, its timestamp and its value (as text when it is UTF-8,
/// else as hex), so any sink shows what failed and why; the event's
/// headers are kept, and the error and key added as headers too.
fn letter(event: &Event, key: Option<&[u8]>, error: &CallError) -> Event {
    let mut record =
        serde_json::json!({ "error": error.to_string(), "timestamp": event.timestamp });
    let mut text = |field: &str, bytes: &[u8]| match std::str::from_utf8(bytes) {
        Ok(text) => record[field] = text.into(),
        Err(_) => record[format!("{field}_hex")] = hex::encode(bytes).into(),
    };
    text("value", &event.value);
    if let Some(key) = key {
        text("key", key);
    }
    let mut headers = event.headers.clone();
    headers.push((ERROR_HEADER.to_string(), error.to_string().into_bytes()));
    if let Some(key) = key {
        headers.push((KEY_HEADER.to_string(), key.to_vec()));
    }
    Event {
        key: event.key.clone(),
        value: record.to_string().into_bytes(),
        timestamp: event.timestamp,
        headers,
    }
}

/// `error` stopped a call over `keys` keys. A function's own error names
/// its key (the SDK reports it first); a trap in a batch of several may
/// not, so run the keys one at a time (`call(processor, i)` for key `i`)
/// on a new instance, undoing everything afterwards, and return the error
/// the key at fault gives (or `error` itself).
pub(crate) fn pinpoint(
    processor: &mut ProcessFunctionInstance,
    keys: usize,
    error: CallError,
    call: impl Fn(&mut ProcessFunctionInstance, usize) -> Result<(), CallError>,
) -> CallError {
    if !error.poisons_instance() || keys < 2 || processor.recover().is_err() {
        return error;
    }
    processor.ctx().mark();
    let found = (0..keys).find_map(|key| call(processor, key).err());
    let undone = processor.ctx().roll_back();
    processor.ctx().unmark();
    match (found, undone) {
        (Some(found), Ok(())) => found,
        _ => error,
    }
}

/// Undo a failed call's effects and make the instance usable again.
fn undo(processor: &mut ProcessFunctionInstance, error: &CallError) -> Result<(), RunError> {
    processor.ctx().roll_back()?;
    if error.poisons_instance() {
        processor.recover()?;
    }
    Ok(())
}

/// Process `groups`, sending the events the function fails on to
/// `output` (into the context's side outputs, in order).
pub(crate) fn dead_letter_process(
    processor: &mut ProcessFunctionInstance,
    groups: &[KeyedEvents],
    output: &str,
) -> Result<(), RunError> {
    processor.ctx().mark();
    let Err(error) = processor.process(groups) else { return Ok(()) };
    undo(processor, &error)?;
    let mut one = [KeyedEvents { key: Vec::new(), events: Vec::with_capacity(1) }];
    for group in groups {
        one[0].key.clone_from(&group.key);
        for event in &group.events {
            one[0].events.clear();
            one[0].events.push(event.clone());
            processor.ctx().mark();
            if let Err(error) = processor.process(&one) {
                undo(processor, &error)?;
                tracing::warn!(%error, output, "dead-lettered an event");
                processor
                    .ctx()
                    .side_outputs
                    .push((output.to_string(), letter(event, Some(&group.key), &error)));
            }
        }
    }
    Ok(())
}

/// Fire `due` timers, sending the timers of keys whose call fails to
/// `output` (one per timer, value `timer <domain> <timestamp>`).
pub(crate) fn dead_letter_timers(
    processor: &mut ProcessFunctionInstance,
    due: &[KeyedTimers],
    output: &str,
) -> Result<(), RunError> {
    processor.ctx().mark();
    let Err(error) = processor.fire_timers(due) else { return Ok(()) };
    undo(processor, &error)?;
    for keyed in due {
        processor.ctx().mark();
        if let Err(error) = processor.fire_timers(std::slice::from_ref(keyed)) {
            undo(processor, &error)?;
            for timer in &keyed.timers {
                let domain = match timer.domain {
                    TimeDomain::EventTime => "event-time",
                    TimeDomain::ProcessingTime => "processing-time",
                };
                let event = Event {
                    key: None,
                    value: format!("timer {domain} {}", timer.timestamp).into_bytes(),
                    timestamp: timer.timestamp,
                    headers: vec![(
                        TIMER_HEADER.to_string(),
                        timer.timestamp.to_string().into_bytes(),
                    )],
                };
                processor
                    .ctx()
                    .side_outputs
                    .push((output.to_string(), letter(&event, Some(&keyed.key), &error)));
            }
        }
    }
    Ok(())
}

/// Events for named side outputs.
pub(crate) type SideEvents = Vec<(String, Event)>;

/// The keys of `events`. Events the key function fails on are taken out
/// of `events` and returned as dead letters for `output`.
pub(crate) fn dead_letter_keys(
    keyer: &mut KeyFunctionInstance,
    events: &mut Vec<Event>,
    output: &str,
) -> Result<(KeyList, SideEvents), RunError> {
    let error = match keyer.extract_keys(events) {
        Ok(keys) => return Ok((keys, Vec::new())),
        Err(error) => error,
    };
    if error.poisons_instance() {
        keyer.recover()?;
    }
    let mut keys = KeyList::default();
    let mut letters = Vec::new();
    let mut kept = Vec::with_capacity(events.len());
    for event in events.drain(..) {
        match keyer.extract_keys(std::slice::from_ref(&event)) {
            Ok(key) => {
                key.iter().for_each(|key| keys.push(key));
                kept.push(event);
            }
            Err(error) => {
                if error.poisons_instance() {
                    keyer.recover()?;
                }
                tracing::warn!(%error, output, "dead-lettered an event");
                letters.push((output.to_string(), letter(&event, None, &error)));
            }
        }
    }
    *events = kept;
    Ok((keys, letters))
}
