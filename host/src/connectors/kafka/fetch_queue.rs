//! Batch reads of fetched records: the source's partitions forwarded to a
//! queue of its own, read with `rd_kafka_consume_batch_queue`.
//!
//! `BaseConsumer::poll` returns one record per call, each wrapped in an
//! event of its own (an allocation, a lock, three clock reads): about a
//! fifth of the source thread's time at half a million records a second.
//! The batch call takes what is queued under one poll. The consumer's own
//! queue keeps statistics, commit results and client errors, which
//! `BaseConsumer::poll` still serves.
//!
//! librdkafka keeps an application's forwarding of a partition's queue
//! across assignments, except that stopping a partition's fetcher drops
//! it: [`FetchQueue::route`] is called before every assignment.

// The batch call and the records it returns have no safe binding.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::time::{Duration, Instant};

use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::types::RDKafkaErrorCode;

use crate::connectors::ConnectorError;

/// One record read, borrowed from librdkafka until the read returns.
pub(super) struct Fetched<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<&'a [u8]>,
    /// Its value; `None` for a tombstone (a null value).
    pub payload: Option<&'a [u8]>,
    /// Milliseconds since the epoch, if the record has a timestamp.
    pub timestamp: Option<i64>,
    /// Its headers (empty when it has none, without allocating).
    pub headers: Vec<(String, Vec<u8>)>,
}

impl<'a> Fetched<'a> {
    /// A record the consumer's own queue returned.
    pub(super) fn of(message: &'a BorrowedMessage<'a>) -> Self {
        Self {
            topic: message.topic(),
            partition: message.partition(),
            offset: message.offset(),
            key: message.key(),
            payload: message.payload(),
            timestamp: message.timestamp().to_millis(),
            headers: message.headers().map_or_else(Vec::new, |h| {
                h.iter()
                    .map(|h| (h.key.to_string(), h.value.unwrap_or_default().to_vec()))
                    .collect()
            }),
        }
    }

    /// The record `message` points to, or its error.
    ///
    /// # Safety
    /// `message` is a live record returned by the batch call.
    unsafe fn from_raw(message: *const rd::rd_kafka_message_t) -> Result<Self, KafkaError> {
        let raw = &*message;
        if raw.err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(KafkaError::MessageConsumption(RDKafkaErrorCode::from(raw.err)));
        }
        let bytes = |data: *mut std::ffi::c_void, len: usize| {
            (!data.is_null()).then(|| std::slice::from_raw_parts(data as *const u8, len))
        };
        let mut kind = rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
        let timestamp = rd::rd_kafka_message_timestamp(message, &mut kind);
        let timestamp = (timestamp != -1
            && kind != rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE)
            .then_some(timestamp);
        Ok(Self {
            topic: CStr::from_ptr(rd::rd_kafka_topic_name(raw.rkt)).to_str().unwrap_or_default(),
            partition: raw.partition,
            offset: raw.offset,
            key: bytes(raw.key, raw.key_len),
            payload: bytes(raw.payload, raw.len),
            timestamp,
            headers: headers(message),
        })
    }
}

/// The headers of `message`, copied.
///
/// # Safety
/// `message` is a live record.
unsafe fn headers(message: *const rd::rd_kafka_message_t) -> Vec<(String, Vec<u8>)> {
    let mut list = std::ptr::null_mut();
    // The call takes a mutable pointer but only reads the record's headers.
    let found = rd::rd_kafka_message_headers(message, &mut list);
    if found != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || list.is_null() {
        return Vec::new();
    }
    let mut all = Vec::new();
    let (mut name, mut value, mut size) = (std::ptr::null(), std::ptr::null(), 0);
    while rd::rd_kafka_header_get_all(list, all.len(), &mut name, &mut value, &mut size)
        == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
    {
        let value = if value.is_null() {
            Vec::new()
        } else {
            std::slice::from_raw_parts(value as *const u8, size).to_vec()
        };
        all.push((CStr::from_ptr(name).to_string_lossy().into_owned(), value));
    }
    all
}

/// A queue of the consumer's client that its partitions' records go to.
/// Drop it before the consumer (declare it first in the struct that holds
/// both).
pub(super) struct FetchQueue {
    queue: *mut rd::rd_kafka_queue_t,
    /// The records of the read in progress.
    taken: Vec<*mut rd::rd_kafka_message_t>,
    /// How long reads waited for a first record, since [`Self::take_waited`].
    waited: Duration,
}

// SAFETY: librdkafka's queues may be used from any thread; the handle and
// the records taken are owned by this value alone.
unsafe impl Send for FetchQueue {}

impl FetchQueue {
    /// A new queue of `consumer`'s client.
    pub(super) fn new<C: ConsumerContext>(consumer: &BaseConsumer<C>) -> Self {
        // SAFETY: the client is live; the queue is destroyed on drop.
        let queue = unsafe { rd::rd_kafka_queue_new(consumer.client().native_ptr()) };
        Self { queue, taken: Vec::new(), waited: Duration::ZERO }
    }

    /// Send what is fetched of `topic/partition` here from now on.
    pub(super) fn route<C: ConsumerContext>(
        &self,
        consumer: &BaseConsumer<C>,
        topic: &str,
        partition: i32,
    ) -> Result<(), ConnectorError> {
        let name = CString::new(topic).map_err(|_| ConnectorError::Config {
            what: "kafka source topic".into(),
            message: format!("{topic:?} contains a NUL byte"),
        })?;
        // SAFETY: the client is live; the partition's queue handle is
        // released once it forwards here.
        unsafe {
            let client = consumer.client().native_ptr();
            let fetched = rd::rd_kafka_queue_get_partition(client, name.as_ptr(), partition);
            if fetched.is_null() {
                return Err(ConnectorError::Kafka {
                    what: format!("routing {topic}/{partition} to the source's queue"),
                    message: "librdkafka has no queue for it".into(),
                });
            }
            rd::rd_kafka_queue_forward(fetched, self.queue);
            rd::rd_kafka_queue_destroy(fetched);
        }
        Ok(())
    }

    /// Wait up to `wait` for a record, take up to `max` of those queued,
    /// and hand each to `each` in order, errors included (the records after
    /// an error are handed on too: destroyed unread, they would be a gap);
    /// how many were taken. An `Err` from `each` ends the read.
    pub(super) fn read(
        &mut self,
        wait: Duration,
        max: usize,
        mut each: impl FnMut(Result<Fetched<'_>, KafkaError>) -> Result<(), ConnectorError>,
    ) -> Result<usize, ConnectorError> {
        // The batch call waits until it has `max` records or the time is
        // up: wait for one, then take what else is there.
        self.take(Duration::ZERO, max);
        if self.taken.is_empty() && !wait.is_zero() {
            // Nothing at hand: the wait for a record is time without input
            // (two clock reads a read that found the queue empty).
            let waiting = Instant::now();
            self.take(wait, 1);
            self.waited += waiting.elapsed();
            if !self.taken.is_empty() {
                self.take(Duration::ZERO, max.saturating_sub(1));
            }
        }
        let count = self.taken.len();
        // SAFETY: taken by the batch call and not yet destroyed.
        let result =
            self.taken.iter().try_for_each(|&message| each(unsafe { Fetched::from_raw(message) }));
        self.release();
        result.map(|()| count)
    }

    /// How long reads waited for a first record since the last call.
    pub(super) fn take_waited(&mut self) -> Duration {
        std::mem::take(&mut self.waited)
    }

    /// Append up to `max` queued records to `taken`, waiting up to `wait`
    /// for them.
    fn take(&mut self, wait: Duration, max: usize) {
        if max == 0 {
            return;
        }
        let start = self.taken.len();
        self.taken.reserve(max);
        // Rounded up: a wait under 1 ms is not a call that returns at once.
        let wait_ms = wait.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        // SAFETY: the buffer has room for `max` pointers past `start`; the
        // call writes that many at most and says how many.
        let got = unsafe {
            rd::rd_kafka_consume_batch_queue(
                self.queue,
                wait_ms,
                self.taken.as_mut_ptr().add(start),
                max,
            )
        };
        if got > 0 {
            // SAFETY: the call initialised `got` ≤ `max` pointers.
            unsafe { self.taken.set_len(start + got as usize) };
        }
    }

    /// Hand the records taken back to librdkafka.
    fn release(&mut self) {
        for message in self.taken.drain(..) {
            // SAFETY: each was returned by the batch call, destroyed once.
            unsafe { rd::rd_kafka_message_destroy(message) };
        }
    }
}

impl Drop for FetchQueue {
    fn drop(&mut self) {
        self.release();
        // SAFETY: the handle was made by `new` and is destroyed once.
        unsafe { rd::rd_kafka_queue_destroy(self.queue) };
    }
}
