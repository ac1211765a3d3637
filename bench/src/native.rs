//! The benchmark workloads' user logic in native Rust, run by the host
//! where their Wasm versions (`functions/bench-*`) run: the baseline of the
//! Wasm/native ratio. Each does exactly what its Wasm twin does, through
//! the same host state calls.
//!
//! Events are binary orders (`weir_sdk::binary::Order`: order id,
//! customer id, amount in cents; 24 bytes little-endian), JSON orders for
//! `bench-json`; keys are the customer id's 8 bytes. `bench-sum` also
//! takes its own 16-byte `(customer, total)` outputs (the `two-stage`
//! workload's second stage), keyed by region `customer % 64` with the
//! total as amount, as its Wasm twin does.

use std::marker::PhantomData;
use std::sync::Arc;

use wasmtime::component::Resource;
use weir_sdk::binary::Order;

use weir_host::runtime::bindings::weir::function::context::Host as _;
use weir_host::runtime::bindings::weir::function::state::{self, HostValueState};
use weir_host::runtime::bindings::weir::function::types::{Accumulate, KeyedEvents};
use weir_host::runtime::host::ValueStateHandle;
use weir_host::runtime::native::{
    NativeAggregateFunction, NativeCatalog, NativeFunction, NativeKeyFunction,
    NativeProcessFunction, NativeRef,
};
use weir_host::runtime::packed::PackedEvents;
use weir_host::runtime::packing::{FiredWindows, KeyList};
use weir_host::runtime::HostCtx;
use weir_host::Event;

/// The native function called `name`, if there is one.
pub fn lookup(name: &str) -> Option<NativeRef> {
    let function: NativeRef = match name {
        "bench-sum" => Arc::new(Sum::<OrderOrPair>(PhantomData)),
        "bench-json" => Arc::new(Sum::<Json>(PhantomData)),
        "bench-dedup" => Arc::new(Dedup),
        "bench-filter" => Arc::new(FilterMap),
        _ => return None,
    };
    Some(function)
}

/// The names [`lookup`] knows.
pub const NAMES: [&str; 4] = ["bench-sum", "bench-json", "bench-dedup", "bench-filter"];

/// Every function [`lookup`] knows, as the catalogue a run resolves
/// `native:` names in (`RunOptions::with_natives`).
pub fn catalog() -> NativeCatalog {
    NativeCatalog::new(NAMES.iter().filter_map(|name| Some((*name, lookup(name)?))))
}

/// How a workload's orders are encoded (a type, so each function is
/// compiled for its own: no indirect call per event).
trait OrderFormat: Send + Sync + 'static {
    /// (customer, amount in cents) of an order, an event's value.
    fn decode(value: &[u8]) -> Result<(u64, i64), String>;
}

/// Binary orders (`weir_sdk::binary::Order`).
struct Binary;

impl OrderFormat for Binary {
    fn decode(value: &[u8]) -> Result<(u64, i64), String> {
        let order = Order::decode(value).map_err(|e| e.to_string())?;
        Ok((order.customer_id, order.amount_cents))
    }
}

/// Regions a `(customer, total)` pair is re-keyed into by `bench-sum`.
pub const REGIONS: u64 = 64;

/// `bench-sum`'s inputs: binary orders, or its own `(customer, total)`
/// pairs (16 bytes), read as `(customer % REGIONS, total)`.
struct OrderOrPair;

impl OrderFormat for OrderOrPair {
    #[inline]
    fn decode(value: &[u8]) -> Result<(u64, i64), String> {
        if value.len() == 16 {
            let half = |i: usize| -> [u8; 8] { value[i..i + 8].try_into().unwrap_or_default() };
            return Ok((u64::from_le_bytes(half(0)) % REGIONS, i64::from_le_bytes(half(8))));
        }
        let order = Order::decode(value).map_err(|_| {
            format!(
                "an order (24 bytes) or a (customer, total) pair (16 bytes), not {} bytes",
                value.len()
            )
        })?;
        Ok((order.customer_id, order.amount_cents))
    }
}

/// JSON orders, read as `bench-json` reads them.
struct Json;

/// The fields of a JSON order the sum needs (the others are skipped).
#[derive(serde::Deserialize)]
struct JsonOrder {
    customer_id: u64,
    amount: f64,
}

impl OrderFormat for Json {
    fn decode(value: &[u8]) -> Result<(u64, i64), String> {
        let order: JsonOrder =
            serde_json::from_slice(value).map_err(|e| format!("a JSON order: {e}"))?;
        Ok((order.customer_id, (order.amount * 100.0).round() as i64))
    }
}

/// Two numbers as a 16-byte event value.
fn pair(a: u64, b: i64) -> Vec<u8> {
    let mut value = Vec::with_capacity(16);
    value.extend_from_slice(&a.to_le_bytes());
    value.extend_from_slice(&b.to_le_bytes());
    value
}

fn state_error<E: std::fmt::Debug>(error: E) -> String {
    format!("state: {error:?}")
}

/// A value state opened on first use, like the SDK's `ValueState`.
#[derive(Default)]
struct Value {
    rep: Option<u32>,
}

impl Value {
    fn handle(
        &mut self,
        ctx: &mut HostCtx,
        name: &str,
        ttl: Option<state::Ttl>,
    ) -> Result<Resource<ValueStateHandle>, String> {
        let rep = match self.rep {
            Some(rep) => rep,
            None => {
                let opened = HostValueState::open(&mut ctx.state(), name.to_string(), ttl)
                    .map_err(state_error)?
                    .map_err(state_error)?;
                *self.rep.insert(opened.rep())
            }
        };
        Ok(Resource::new_borrow(rep))
    }

    fn get(
        &mut self,
        ctx: &mut HostCtx,
        name: &str,
        ttl: Option<state::Ttl>,
    ) -> Result<Option<Vec<u8>>, String> {
        let handle = self.handle(ctx, name, ttl)?;
        HostValueState::get(&mut ctx.state(), handle).map_err(state_error)?.map_err(state_error)
    }

    fn set(
        &mut self,
        ctx: &mut HostCtx,
        name: &str,
        ttl: Option<state::Ttl>,
        value: Vec<u8>,
    ) -> Result<(), String> {
        let handle = self.handle(ctx, name, ttl)?;
        HostValueState::set(&mut ctx.state(), handle, value)
            .map_err(state_error)?
            .map_err(state_error)
    }
}

fn select(ctx: &mut HostCtx, index: usize) -> Result<(), String> {
    state::Host::select_key(&mut ctx.state(), index as u32)
        .map_err(state_error)?
        .map_err(state_error)
}

/// Key: the customer id.
struct CustomerKey<F>(PhantomData<F>);

impl<F: OrderFormat> CustomerKey<F> {
    fn push_keys<'a>(
        values: impl Iterator<Item = &'a [u8]>,
        keys: &mut KeyList,
    ) -> Result<(), String> {
        for value in values {
            keys.push(&F::decode(value)?.0.to_le_bytes());
        }
        Ok(())
    }
}

impl<F: OrderFormat> NativeKeyFunction for CustomerKey<F> {
    fn extract_keys(&mut self, events: &[Event], keys: &mut KeyList) -> Result<(), String> {
        Self::push_keys(events.iter().map(|event| &event.value[..]), keys)
    }

    fn extract_packed_keys(
        &mut self,
        events: &PackedEvents,
        keys: &mut KeyList,
    ) -> Result<(), String> {
        Self::push_keys(events.iter().map(|event| event.value), keys)
    }
}

/// (a) Running sum per customer: emit (customer, total) per order.
/// (Over orders in format `F`: binary orders or pairs for `bench-sum`,
/// JSON for `bench-json`.)
struct Sum<F>(PhantomData<F>);

impl<F: OrderFormat> NativeFunction for Sum<F> {
    fn key(&self) -> Option<Box<dyn NativeKeyFunction>> {
        Some(Box::new(CustomerKey::<F>(PhantomData)))
    }
    fn process(&self) -> Option<Box<dyn NativeProcessFunction>> {
        Some(Box::new(SumProcess::<F> { total: Value::default(), format: PhantomData }))
    }
    fn aggregate(&self) -> Option<Box<dyn NativeAggregateFunction>> {
        Some(Box::new(SumAggregate::<F>(PhantomData)))
    }
}

struct SumProcess<F> {
    total: Value,
    format: PhantomData<F>,
}

impl<F: OrderFormat> NativeProcessFunction for SumProcess<F> {
    fn process(&mut self, batch: &[KeyedEvents], ctx: &mut HostCtx) -> Result<(), String> {
        for (index, keyed) in batch.iter().enumerate() {
            select(ctx, index)?;
            let stored = self.total.get(ctx, "total", None)?;
            let mut total = stored
                .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
                .map_or(0, i64::from_le_bytes);
            for event in &keyed.events {
                let (customer, amount) = F::decode(&event.value)?;
                total = total.checked_add(amount).ok_or("total overflows")?;
                ctx.context()
                    .emit(Event {
                        key: None,
                        value: pair(customer, total),
                        timestamp: event.timestamp,
                        headers: Vec::new(),
                    })
                    .map_err(state_error)?;
            }
            self.total.set(ctx, "total", None, total.to_le_bytes().to_vec())?;
        }
        Ok(())
    }
}

/// (b) Sum per customer per window: accumulators are i64 cents.
struct SumAggregate<F>(PhantomData<F>);

fn cents(bytes: &[u8]) -> Result<i64, String> {
    <[u8; 8]>::try_from(bytes)
        .map(i64::from_le_bytes)
        .map_err(|_| "an accumulator is 8 bytes".to_string())
}

impl<F: OrderFormat> NativeAggregateFunction for SumAggregate<F> {
    fn add(&mut self, batch: &[Accumulate]) -> Result<Vec<Vec<u8>>, String> {
        batch
            .iter()
            .map(|entry| {
                let mut total = entry.accumulator.as_deref().map_or(Ok(0), cents)?;
                for event in &entry.events {
                    total =
                        total.checked_add(F::decode(&event.value)?.1).ok_or("total overflows")?;
                }
                Ok(total.to_le_bytes().to_vec())
            })
            .collect()
    }

    fn merge(&mut self, a: &[u8], b: &[u8]) -> Result<Vec<u8>, String> {
        Ok(cents(a)?.checked_add(cents(b)?).ok_or("total overflows")?.to_le_bytes().to_vec())
    }

    fn results(&mut self, batch: &FiredWindows) -> Result<Vec<Event>, String> {
        batch
            .iter()
            .map(|(key, window, accumulator)| {
                let customer = <[u8; 8]>::try_from(key)
                    .map(u64::from_le_bytes)
                    .map_err(|_| "a key is 8 bytes".to_string())?;
                Ok(Event {
                    key: None,
                    value: pair(customer, cents(accumulator)?),
                    timestamp: window.end - 1,
                    headers: Vec::new(),
                })
            })
            .collect()
    }
}

/// (c) Dedup per customer: the first order of a customer is emitted; later
/// ones are dropped until the "seen" state expires (TTL 1 minute of
/// processing time).
struct Dedup;

/// How long a customer stays "seen".
pub const DEDUP_TTL_MILLIS: u64 = 60_000;

impl NativeFunction for Dedup {
    fn key(&self) -> Option<Box<dyn NativeKeyFunction>> {
        Some(Box::new(CustomerKey::<Binary>(PhantomData)))
    }
    fn process(&self) -> Option<Box<dyn NativeProcessFunction>> {
        Some(Box::new(DedupProcess::default()))
    }
}

#[derive(Default)]
struct DedupProcess {
    seen: Value,
}

impl NativeProcessFunction for DedupProcess {
    fn process(&mut self, batch: &[KeyedEvents], ctx: &mut HostCtx) -> Result<(), String> {
        let ttl = Some(state::Ttl {
            millis: DEDUP_TTL_MILLIS,
            update: state::TtlUpdate::OnCreateAndWrite,
        });
        for (index, keyed) in batch.iter().enumerate() {
            select(ctx, index)?;
            if self.seen.get(ctx, "seen", ttl)?.is_some() {
                continue;
            }
            if let Some(first) = keyed.events.first() {
                ctx.context().emit(first.clone()).map_err(state_error)?;
                self.seen.set(ctx, "seen", ttl, vec![1])?;
            }
        }
        Ok(())
    }
}

/// (d) Stateless filter and map: orders of at least 10.00 become
/// (customer, amount × 2).
struct FilterMap;

impl NativeFunction for FilterMap {
    fn key(&self) -> Option<Box<dyn NativeKeyFunction>> {
        Some(Box::new(CustomerKey::<Binary>(PhantomData)))
    }
    fn process(&self) -> Option<Box<dyn NativeProcessFunction>> {
        Some(Box::new(FilterMapProcess))
    }
}

struct FilterMapProcess;

impl NativeProcessFunction for FilterMapProcess {
    fn process(&mut self, batch: &[KeyedEvents], ctx: &mut HostCtx) -> Result<(), String> {
        for keyed in batch {
            for event in &keyed.events {
                let (customer, amount) = Binary::decode(&event.value)?;
                if amount >= 1_000 {
                    ctx.context()
                        .emit(Event {
                            key: None,
                            value: pair(customer, amount * 2),
                            timestamp: event.timestamp,
                            headers: Vec::new(),
                        })
                        .map_err(state_error)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_sum_reads_orders_and_its_own_pairs() {
        let order = Order { order_id: 1, customer_id: 70, amount_cents: 250 };
        assert_eq!(OrderOrPair::decode(&order.encode()), Ok((70, 250)));
        assert_eq!(OrderOrPair::decode(&pair(70, 1234)), Ok((70 % REGIONS, 1234)));
        let error = OrderOrPair::decode(&[0; 20]).unwrap_err();
        assert!(error.contains("not 20 bytes"), "{error}");
        // Dedup and filter read orders only, as their Wasm twins do.
        assert!(Binary::decode(&pair(70, 1234)).is_err());
    }
}
