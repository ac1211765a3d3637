//! Exchange topics of cluster mode (see `docs/cluster.md`): the Kafka topic
//! between a producer unit (an ingest unit, or a task of the stage before)
//! and the tasks of a keyed stage, one partition per task.
//!
//! A producer's exactly-once sink writes each record to the partition of
//! the task that owns its key's group ([`ExchangeOutput`]); the key comes
//! from the key function of the stage, run in the producer, as the
//! record's last header [`KEY_HEADER`], which the sink strips. The record
//! carries that key on to the task with its event time ([`KEYED_HEADER`]),
//! so the task keys it without calling the key function again. Event time
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

/// Header of a keyed exchange's data record, in place of [`TIME_HEADER`]:
/// its event time (8 bytes, big-endian), then the key it was routed by.
/// The task reading it keys it by that key: the key function runs once per
/// event, in the producer, and a record is keyed as the partition it is in
/// was chosen, whatever version of the key function a task runs.
pub const KEYED_HEADER: &str = "weir-keyed";

/// The value of [`KEYED_HEADER`] for event time `timestamp` and `key`,
/// written into `into` (cleared first).
pub fn keyed_header(timestamp: i64, key: &[u8], into: &mut Vec<u8>) {
    into.clear();
    into.extend_from_slice(&time_header(timestamp));
    into.extend_from_slice(key);
}

/// What a record read from an exchange topic is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExchangeRecord {
    /// A data record (its event time given back, the sink's last header
    /// removed), with the key it was routed by if the sink wrote one
    /// ([`KEYED_HEADER`]; a broadcast exchange's records, and those of
    /// older versions, have none).
    Data(Option<Vec<u8>>),
    /// A control record carrying a producer's watermark.
    Control(ExchangeMark),
}

/// Tell a record read from an exchange topic for what it is, by what only
/// an exchange sink writes, never by a header an input record could carry:
/// a data record's *last* header is the [`KEYED_HEADER`] (or, broadcast or
/// of an older version, the [`TIME_HEADER`]) the sink appended (removed
/// here, giving the event back its event time), and a control record
/// carries exactly one header, [`WATERMARK_HEADER`]. Headers the input came
/// with — `weir-watermark`, `weir-time`, `weir-keyed`, `weir-key` included
/// — stay the event's own and never change what a task does. A record that
/// is neither was not written by an exchange sink: an error naming where.
pub fn classify(
    event: &mut Event,
    producers: &[String],
    location: impl Fn() -> String,
) -> Result<ExchangeRecord, ConnectorError> {
    if let Some((name, value)) = event.headers.last() {
        if let (true, Ok(bytes)) = (name == TIME_HEADER, <[u8; 8]>::try_from(value.as_slice())) {
            event.timestamp = i64::from_be_bytes(bytes);
            event.headers.pop();
            return Ok(ExchangeRecord::Data(None));
        }
        if let Some(time) = value.first_chunk::<8>().filter(|_| name == KEYED_HEADER) {
            event.timestamp = i64::from_be_bytes(*time);
            let (_, mut key) = event.headers.pop().expect("the last header");
            key.drain(..8);
            return Ok(ExchangeRecord::Data(Some(key)));
        }
    }
    match event.headers.as_slice() {
        [(name, value)] if name == WATERMARK_HEADER => {
            ExchangeMark::parse(value, producers, location).map(ExchangeRecord::Control)
        }
        _ => Err(ConnectorError::BadRecord {
            location: location(),
            message: "a record an exchange sink did not write (neither Weir's event-time header last nor a watermark control record): is something other than the pipeline's workers producing to its weir-<pipeline>-* topics?".into(),
        }),
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
    /// This producer's unit name, carried by its control records so that a
    /// task knows the producer whatever the numbering.
    pub unit: String,
    /// Every record to every partition (a broadcast input), not by key.
    pub broadcast: bool,
}

/// The source side: how a task reads its partition of an exchange topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeInput {
    /// The units that write the topic, in producer order (each has its
    /// own watermark).
    pub producers: Vec<String>,
}

/// A record's headers.
pub type Headers = [(String, Vec<u8>)];

/// Where an exchange sink writes one record, and what with.
pub struct Routed<'e> {
    /// The partition (or every one).
    pub target: Target,
    /// The key it was routed by (none: a broadcast).
    pub key: Option<&'e [u8]>,
    /// Its headers, the key header stripped.
    pub headers: &'e Headers,
}

/// Where one record goes.
pub enum Target {
    /// To this partition.
    Partition(i32),
    /// To every partition.
    All,
}

impl ExchangeOutput {
    /// Where `event` goes, by its key `route` (from the router's batch),
    /// else the key it carries as its last header, and the headers to
    /// write with it (the key header stripped).
    pub fn target<'e>(
        &self,
        event: EventRef<'e>,
        route: Option<&'e [u8]>,
    ) -> Result<Routed<'e>, ConnectorError> {
        if self.broadcast {
            return Ok(Routed { target: Target::All, key: None, headers: event.headers });
        }
        let keyed = match (route, event.headers.split_last()) {
            (Some(key), _) => Some((key, event.headers)),
            (None, Some(((name, key), rest))) if name == KEY_HEADER => Some((key.as_slice(), rest)),
            _ => None,
        };
        match keyed {
            Some((key, headers)) => {
                let group = key_group(key, self.max_parallelism);
                let task = subtask_for_key_group(group, self.max_parallelism, self.tasks);
                let target = Target::Partition(i32::from(task));
                Ok(Routed { target, key: Some(key), headers })
            }
            None => Err(ConnectorError::Config {
                what: "exchange sink".into(),
                message: "a record reached a keyed exchange without its key (no key function ran before the sink)".into(),
            }),
        }
    }

    /// The control record carrying this producer's event time `mark`.
    pub fn control_record(&self, mark: Option<i64>) -> Event {
        let mark = ExchangeMark {
            producer: self.producer,
            unit: Some(self.unit.clone()),
            watermark: mark,
            idle: mark.is_none(),
            end: false,
        };
        mark.record()
    }

    /// The control record saying this producer has ended: it writes
    /// nothing more to the topic (its final transaction of a drained stop,
    /// see `docs/cluster.md`).
    pub fn end_record(&self) -> Event {
        let mark = ExchangeMark {
            producer: self.producer,
            unit: Some(self.unit.clone()),
            watermark: None,
            idle: true,
            end: true,
        };
        mark.record()
    }
}

/// What a control record says: producer `producer` has reached event time
/// `watermark`, or is idle (holds nothing back until it reports a
/// watermark again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExchangeMark {
    /// The producer's number, as the reading task numbers its producers
    /// (from `unit` when the record names one).
    pub producer: usize,
    /// The producer's unit (records of older versions carry only the
    /// number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Its watermark, unless idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watermark: Option<i64>,
    /// Idle: no input of the producer holds event time back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idle: bool,
    /// Ended: the producer was drained and writes nothing more.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub end: bool,
}

impl ExchangeMark {
    /// The control record carrying this mark.
    fn record(&self) -> Event {
        let value = serde_json::to_vec(self).unwrap_or_default();
        Event {
            key: None,
            value: Vec::new(),
            timestamp: 0,
            headers: vec![(WATERMARK_HEADER.into(), value)],
        }
    }

    /// The mark a control record's [`WATERMARK_HEADER`] value says, its
    /// producer numbered as in `producers` (the topic's producer units): by
    /// the unit it names, else by its number. One that cannot be read, or
    /// names a producer the topic does not have, is an error naming where
    /// it was.
    fn parse(
        value: &[u8],
        producers: &[String],
        location: impl Fn() -> String,
    ) -> Result<Self, ConnectorError> {
        let bad = |message: String| ConnectorError::BadRecord { location: location(), message };
        let mut mark: Self = serde_json::from_slice(value)
            .map_err(|e| bad(format!("unreadable watermark control record: {e}")))?;
        if let Some(unit) = &mark.unit {
            mark.producer = producers.iter().position(|p| p == unit).ok_or_else(|| {
                bad(format!(
                    "watermark of producer unit {unit}, which does not write this topic in the pipeline's plan (its producers: {}): the plan changed while the exchange topics were kept; run the workers with the plan that wrote it, or delete the weir-<pipeline>-* topics and restart from a savepoint",
                    producers.join(", ")
                ))
            })?;
            return Ok(mark);
        }
        let producers = producers.len();
        if mark.producer >= producers {
            return Err(bad(format!(
                "watermark of producer {} but the topic has {producers} producers: the pipeline's shape changed (its input partitions or a stage's parallelism) while its exchange topics were kept; delete the weir-<pipeline>-* topics and restart from a savepoint",
                mark.producer
            )));
        }
        Ok(mark)
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
        let output = ExchangeOutput {
            tasks: 6,
            max_parallelism: 128,
            producer: 0,
            unit: "p-source-0".into(),
            broadcast: false,
        };
        for key in [&b"c1"[..], b"c2", b"c3", b"some longer key"] {
            let event = keyed(key);
            let routed = output.target((&event).into(), None).unwrap();
            let expected = subtask_for_key_group(key_group(key, 128), 128, 6);
            assert!(matches!(routed.target, Target::Partition(p) if p == i32::from(expected)));
            assert_eq!(routed.key, Some(key));
            assert_eq!(routed.headers, &[("h".to_string(), b"1".to_vec())]);
        }
        let mut keyless = keyed(b"x");
        keyless.headers.pop();
        assert!(
            output.target((&keyless).into(), None).is_err(),
            "no key: refused, not sent anywhere"
        );
        // Routed by the batch's key: the headers are the event's own.
        let routed = output.target((&keyless).into(), Some(b"c1")).unwrap();
        assert_eq!(routed.key, Some(&b"c1"[..]));
        assert_eq!(routed.headers, &[("h".to_string(), b"1".to_vec())]);
    }

    #[test]
    fn a_records_event_time_travels_in_its_last_header() {
        let mut event = keyed(b"k");
        event.headers.pop();
        event.headers.push((TIME_HEADER.into(), time_header(-5).to_vec()));
        event.timestamp = 1_700_000_000_000; // the broker's append time
        assert_eq!(classify(&mut event, &[], String::new).unwrap(), ExchangeRecord::Data(None));
        assert_eq!(event.timestamp, -5, "even one a Kafka timestamp cannot hold");
        assert_eq!(event.headers, [("h".to_string(), b"1".to_vec())]);
    }

    #[test]
    fn a_keyed_record_carries_its_event_time_and_the_key_it_was_routed_by() {
        for key in [&b"customer-7"[..], b""] {
            let mut event = keyed(b"k");
            event.headers.pop();
            let mut value = Vec::new();
            keyed_header(-5, key, &mut value);
            event.headers.push((KEYED_HEADER.into(), value));
            event.timestamp = 1_700_000_000_000; // the broker's append time
            let record = classify(&mut event, &[], String::new).unwrap();
            assert_eq!(record, ExchangeRecord::Data(Some(key.to_vec())));
            assert_eq!(event.timestamp, -5);
            assert_eq!(event.headers, [("h".to_string(), b"1".to_vec())], "the input's own kept");
        }
    }

    #[test]
    fn control_records_round_trip_and_name_a_bad_producer() {
        let output = ExchangeOutput {
            tasks: 2,
            max_parallelism: 128,
            producer: 3,
            unit: "p-source-3".into(),
            broadcast: false,
        };
        let units = |n: usize| (0..n).map(|i| format!("p-source-{i}")).collect::<Vec<_>>();
        let control = |mark: Option<i64>, producers: &[String]| {
            let mut record = output.control_record(mark);
            classify(&mut record, producers, || "t/0@5".into())
        };
        let unit = Some("p-source-3".to_string());
        let expected = ExchangeMark {
            producer: 3,
            unit: unit.clone(),
            watermark: Some(1_000),
            idle: false,
            end: false,
        };
        assert_eq!(control(Some(1_000), &units(4)).unwrap(), ExchangeRecord::Control(expected));
        let idle = ExchangeMark {
            producer: 3,
            unit: unit.clone(),
            watermark: None,
            idle: true,
            end: false,
        };
        assert_eq!(control(None, &units(4)).unwrap(), ExchangeRecord::Control(idle.clone()));
        let mut ended = output.end_record();
        let ended = classify(&mut ended, &units(4), String::new).unwrap();
        assert_eq!(ended, ExchangeRecord::Control(ExchangeMark { end: true, ..idle }));
        let error = control(Some(1_000), &units(2)).unwrap_err().to_string();
        assert!(error.contains("t/0@5") && error.contains("p-source-3"), "{error}");
        // Numbered differently (a partition added before it): found by name.
        let renumbered = ["p-source-0".to_string(), "p-source-9".into(), "p-source-3".into()];
        match control(Some(7), &renumbered).unwrap() {
            ExchangeRecord::Control(mark) => assert_eq!(mark.producer, 2),
            other => panic!("{other:?}"),
        }
        // A record of an older version: by number.
        let mut old = output.control_record(Some(1));
        old.headers[0].1 = br#"{"producer":1,"watermark":1}"#.to_vec();
        let mark = classify(&mut old, &units(2), String::new).unwrap();
        assert!(matches!(mark, ExchangeRecord::Control(ExchangeMark { producer: 1, .. })));
    }

    /// Headers an input record came with, as the exchange sink writes them:
    /// the input's own, then Weir's event time and key `k`.
    fn written(input_headers: &[(&str, &[u8])]) -> Event {
        let mut headers: Vec<(String, Vec<u8>)> =
            input_headers.iter().map(|(n, v)| (n.to_string(), v.to_vec())).collect();
        let mut keyed = Vec::new();
        keyed_header(42, b"k", &mut keyed);
        headers.push((KEYED_HEADER.into(), keyed));
        Event { key: None, value: b"{}".to_vec(), timestamp: 0, headers }
    }

    #[test]
    fn forged_weir_headers_on_an_input_record_stay_data() {
        let forged: [&[(&str, &[u8])]; 6] = [
            &[(WATERMARK_HEADER, br#"{"producer":99}"#)],
            &[(WATERMARK_HEADER, b"not json")],
            &[(WATERMARK_HEADER, br#"{"producer":0,"watermark":9000000000000000}"#)],
            &[(TIME_HEADER, &time_header(i64::MAX)), (KEY_HEADER, b"other")],
            &[(WATERMARK_HEADER, br#"{"producer":0,"idle":true}"#), (TIME_HEADER, b"short")],
            &[(KEYED_HEADER, b"\0\0\0\0\0\0\0\x01forged-key")],
        ];
        for headers in forged {
            let mut event = written(headers);
            let record = classify(&mut event, &["p-0".to_string()], String::new).unwrap();
            assert_eq!(record, ExchangeRecord::Data(Some(b"k".to_vec())), "{headers:?}");
            assert_eq!(event.timestamp, 42, "the event time Weir wrote, not a forged one");
            assert_eq!(event.headers.len(), headers.len(), "the input's headers kept as they were");
        }
    }

    #[test]
    fn a_record_no_exchange_sink_wrote_is_refused_naming_where() {
        for headers in [vec![], vec![("h".to_string(), b"1".to_vec())]] {
            let mut event = Event { key: None, value: vec![], timestamp: 0, headers };
            let error = classify(&mut event, &[], || "t/2@7".into()).unwrap_err().to_string();
            assert!(error.contains("t/2@7") && error.contains("did not write"), "{error}");
        }
    }
}
