//! Exchange topics of cluster mode (see `docs/cluster.md`): the Kafka topic
//! between a producer unit (an ingest unit, or a task of the stage before)
//! and the tasks of a keyed stage, one partition per task.
//!
//! A producer's exactly-once sink writes each record to the partition of
//! the task that owns its key's group ([`ExchangeOutput`]); the key comes
//! from the key function of the stage, run in the producer, as the
//! record's last header [`KEY_HEADER`], which the sink strips. Event time
//! travels in-band: at the end of each epoch the sink writes, in the same
//! transaction, one control record to every partition carrying the
//! producer's watermark ([`WATERMARK_HEADER`], [`ExchangeMark`]). A task's
//! source ([`ExchangeInput`]) delivers the data records and turns the
//! control records into the watermark of each producer, in the order they
//! come. This module owns the encoding; it never talks to Kafka itself.

use serde::{Deserialize, Serialize};

use crate::connectors::ConnectorError;
use crate::runtime::packed::EventRef;
use crate::state::{key_group, subtask_for_key_group};
use crate::Event;

/// Header carrying the exchange key from the router to the sink (never
/// written to Kafka).
pub const KEY_HEADER: &str = "weir-key";

/// Header of a watermark control record.
pub const WATERMARK_HEADER: &str = "weir-watermark";

/// Header carrying a record's event time (8 bytes, big-endian): an
/// exchange topic's records take the broker's append time as their Kafka
/// timestamp, so that retention counts from when they were written, not
/// from how old the events are.
pub const TIME_HEADER: &str = "weir-time";

/// The event time `timestamp` as the value of [`TIME_HEADER`].
pub fn time_header(timestamp: i64) -> [u8; 8] {
    timestamp.to_be_bytes()
}

/// Give an exchange record back its event time, from its last header
/// ([`TIME_HEADER`], removed).
pub fn take_event_time(event: &mut Event) {
    if let Some((name, value)) = event.headers.last() {
        if let (true, Ok(bytes)) = (name == TIME_HEADER, <[u8; 8]>::try_from(value.as_slice())) {
            event.timestamp = i64::from_be_bytes(bytes);
            event.headers.pop();
        }
    }
}

/// The sink side: how a producer unit writes an exchange topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeOutput {
    /// Partitions of the topic: the tasks of the stage it feeds.
    pub tasks: u16,
    /// The pipeline's key groups.
    pub max_parallelism: u16,
    /// This producer's number among the topic's producers.
    pub producer: usize,
    /// Every record to every partition (a broadcast input), not by key.
    pub broadcast: bool,
}

/// The source side: how a task reads its partition of an exchange topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeInput {
    /// How many producers write the topic (each has its own watermark).
    pub producers: usize,
}

/// A record's headers.
pub type Headers = [(String, Vec<u8>)];

/// Where one record goes.
pub enum Target {
    /// To this partition.
    Partition(i32),
    /// To every partition.
    All,
}

impl ExchangeOutput {
    /// Where `event` goes, and the headers to write with it (the key
    /// header stripped).
    pub fn target<'e>(&self, event: EventRef<'e>) -> Result<(Target, &'e Headers), ConnectorError> {
        if self.broadcast {
            return Ok((Target::All, event.headers));
        }
        match event.headers.split_last() {
            Some(((name, key), rest)) if name == KEY_HEADER => {
                let group = key_group(key, self.max_parallelism);
                let task = subtask_for_key_group(group, self.max_parallelism, self.tasks);
                Ok((Target::Partition(i32::from(task)), rest))
            }
            _ => Err(ConnectorError::Config {
                what: "exchange sink".into(),
                message: "a record reached a keyed exchange without its key (no key function ran before the sink)".into(),
            }),
        }
    }

    /// The control record carrying this producer's event time `mark`.
    pub fn control_record(&self, mark: Option<i64>) -> Event {
        let mark = ExchangeMark { producer: self.producer, watermark: mark, idle: mark.is_none() };
        let value = serde_json::to_vec(&mark).unwrap_or_default();
        Event {
            key: None,
            value: Vec::new(),
            timestamp: 0,
            headers: vec![(WATERMARK_HEADER.into(), value)],
        }
    }
}

/// What a control record says: producer `producer` has reached event time
/// `watermark`, or is idle (holds nothing back until it reports a
/// watermark again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExchangeMark {
    /// The producer.
    pub producer: usize,
    /// Its watermark, unless idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watermark: Option<i64>,
    /// Idle: no input of the producer holds event time back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idle: bool,
}

impl ExchangeMark {
    /// The mark a record carries, if it is a control record; a control
    /// record that cannot be read (or names a producer beyond `producers`)
    /// is an error naming where it was.
    pub fn of(
        headers: &Headers,
        producers: usize,
        location: impl Fn() -> String,
    ) -> Result<Option<Self>, ConnectorError> {
        let Some((_, value)) = headers.iter().find(|(name, _)| name == WATERMARK_HEADER) else {
            return Ok(None);
        };
        let bad = |message: String| ConnectorError::BadRecord { location: location(), message };
        let mark: Self = serde_json::from_slice(value)
            .map_err(|e| bad(format!("unreadable watermark control record: {e}")))?;
        if mark.producer >= producers {
            return Err(bad(format!(
                "watermark of producer {} but the topic has {producers} producers: the pipeline's shape changed (its input partitions or a stage's parallelism) while its exchange topics were kept; delete the weir-<pipeline>-* topics and restart from a savepoint",
                mark.producer
            )));
        }
        Ok(Some(mark))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyed(key: &[u8]) -> Event {
        Event {
            key: Some(b"record-key".to_vec()),
            value: b"v".to_vec(),
            timestamp: 7,
            headers: vec![("h".into(), b"1".to_vec()), (KEY_HEADER.into(), key.to_vec())],
        }
    }

    #[test]
    fn a_record_goes_to_the_task_owning_its_key_group_without_the_key_header() {
        let output =
            ExchangeOutput { tasks: 6, max_parallelism: 128, producer: 0, broadcast: false };
        for key in [&b"c1"[..], b"c2", b"c3", b"some longer key"] {
            let event = keyed(key);
            let (target, headers) = output.target((&event).into()).unwrap();
            let expected = subtask_for_key_group(key_group(key, 128), 128, 6);
            assert!(matches!(target, Target::Partition(p) if p == i32::from(expected)));
            assert_eq!(headers, &[("h".to_string(), b"1".to_vec())]);
        }
        let mut keyless = keyed(b"x");
        keyless.headers.pop();
        assert!(output.target((&keyless).into()).is_err(), "no key: refused, not sent anywhere");
    }

    #[test]
    fn a_records_event_time_travels_in_its_last_header() {
        let mut event = keyed(b"k");
        event.headers.pop();
        event.headers.push((TIME_HEADER.into(), time_header(-5).to_vec()));
        event.timestamp = 1_700_000_000_000; // the broker's append time
        take_event_time(&mut event);
        assert_eq!(event.timestamp, -5, "even one a Kafka timestamp cannot hold");
        assert_eq!(event.headers, [("h".to_string(), b"1".to_vec())]);
    }

    #[test]
    fn control_records_round_trip_and_name_a_bad_producer() {
        let output =
            ExchangeOutput { tasks: 2, max_parallelism: 128, producer: 3, broadcast: false };
        let at = output.control_record(Some(1_000));
        let mark = ExchangeMark::of(&at.headers, 4, String::new).unwrap().unwrap();
        assert_eq!(mark, ExchangeMark { producer: 3, watermark: Some(1_000), idle: false });
        let idle = output.control_record(None);
        let mark = ExchangeMark::of(&idle.headers, 4, String::new).unwrap().unwrap();
        assert!(mark.idle && mark.watermark.is_none());
        assert!(ExchangeMark::of(&[], 4, String::new).unwrap().is_none(), "a data record");
        let error = ExchangeMark::of(&at.headers, 2, || "t/0@5".into()).unwrap_err().to_string();
        assert!(error.contains("t/0@5") && error.contains("producer 3"), "{error}");
    }
}
