//! Order status from orders and their payments: a transform chained into
//! the payments source and a keyed co-process function with event-time
//! timers (Flink's `KeyedCoProcessFunction` pattern).
//!
//! The pipeline ([pipeline.yaml](../pipeline.yaml)) reads `orders.jsonl`
//! and `payments.jsonl`. One component exports three roles:
//!
//! * **key** — the order id (decimal text) of an order, a payment or a
//!   cleaned payment (all have `order_id`);
//! * **transform** (`clean-payments`, over payments) — drops refunds
//!   (`"kind":"refund"`) and amounts of zero or less (filter) and reshapes
//!   the rest to `{"order_id":7,"paid":12.50,"at":1768471290000}` (map;
//!   `at` is the payment's event time in ms);
//! * **co-process** (`status`, keyed by order id; input 1 orders, input 2
//!   cleaned payments) — an order waits for its payment with an event-time
//!   timer at order time + 10 min, a payment waits for its order. Once
//!   both are there: `{"order_id":7,"status":"paid","amount":12.50}` if the
//!   payment is at most 10 min after the order (or before it); at the
//!   timer, with no payment: `{"order_id":7,"status":"unpaid"}`; a payment
//!   after an order was declared unpaid (up to order time + 1 h):
//!   `{"order_id":7,"status":"late-payment","amount":12.50}`. The first
//!   payment of an order wins; later ones are kept as lone payments and
//!   forgotten 10 min after their time, like a payment whose order never
//!   comes. A key's state is cleared once it is decided.
//!
//! Event time: a payment later than the deadline may reach the function
//! before the timer fires (when the orders source lags behind), or even
//! before its order. It is judged by its event time all the same —
//! "unpaid" then "late-payment" — so the output does not depend on how
//! the two sources interleave (`expected.py` checks that on many
//! interleavings).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use weir_sdk::{
    function, Cents, CoProcessFunction, Context, Emitter, Error, Event, FiredTimer, KeyFunction,
    LogLevel, TransformFunction, ValueState,
};

/// How long after its order a payment may come to count as paid (ms).
pub const PAY_WITHIN: i64 = 10 * 60 * 1000;
/// How long after its order an unpaid order takes a late payment (ms).
pub const REMEMBER_UNPAID: i64 = 60 * 60 * 1000;
/// How long a payment waits for its order (ms).
pub const KEEP_PAYMENT: i64 = 10 * 60 * 1000;

/// The field every input shape has.
#[derive(Deserialize)]
struct OrderRef {
    order_id: u64,
}

/// A payment as read from `payments.jsonl`.
#[derive(Deserialize)]
struct RawPayment<'a> {
    order_id: u64,
    #[serde(borrow)]
    amount: &'a RawValue,
    #[serde(default)]
    kind: Option<&'a str>,
}

/// A cleaned payment: what `clean-payments` emits and `status` reads.
#[derive(Serialize, Deserialize)]
struct Payment<P> {
    order_id: u64,
    /// The amount, a JSON number with two decimals.
    paid: P,
    /// Its event time (ms).
    at: i64,
}

/// A status line.
#[derive(Serialize)]
struct Status<'a> {
    order_id: u64,
    status: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    amount: Option<Box<RawValue>>,
}

/// What a key is waiting for; at most one at a time, with one timer.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
pub enum Waiting {
    /// An order at this time waits for its payment (timer: + [`PAY_WITHIN`]).
    Order(i64),
    /// A payment (amount in cents, time) waits for its order (timer: + [`KEEP_PAYMENT`]).
    Payment(i64, i64),
    /// The order at this time was declared unpaid (timer: + [`REMEMBER_UNPAID`]).
    Unpaid(i64),
}

impl Waiting {
    /// The time of the timer that ends the wait.
    fn deadline(&self) -> i64 {
        match *self {
            Waiting::Order(at) => at + PAY_WITHIN,
            Waiting::Payment(_, at) => at + KEEP_PAYMENT,
            Waiting::Unpaid(at) => at + REMEMBER_UNPAID,
        }
    }
}

/// The function: per order id, what it is waiting for.
pub struct OrderStatus {
    waiting: ValueState<Waiting>,
}

impl Default for OrderStatus {
    fn default() -> Self {
        Self { waiting: ValueState::new("waiting") }
    }
}

/// Emit the status `status` of `order_id` at `timestamp`.
fn emit(
    ctx: &mut Context,
    order_id: u64,
    status: &str,
    amount: Option<Cents>,
    timestamp: i64,
) -> Result<(), Error> {
    let amount = amount.map(Cents::to_json_number);
    ctx.emit(Event::from_json(&Status { order_id, status, amount }, timestamp)?);
    Ok(())
}

/// The order id a key stands for.
fn order_id(key: &[u8]) -> Result<u64, Error> {
    std::str::from_utf8(key)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| Error::msg(format!("key {key:?} is not an order id")))
}

impl OrderStatus {
    /// Start waiting for `waiting`, with its timer.
    fn wait(&mut self, waiting: Waiting, ctx: &mut Context) -> Result<(), Error> {
        ctx.register_event_time_timer(waiting.deadline())?;
        self.waiting.set(&waiting)
    }

    /// Stop waiting for `waiting`: clear the key's state and its timer.
    fn done(&mut self, waiting: &Waiting, ctx: &mut Context) -> Result<(), Error> {
        ctx.delete_event_time_timer(waiting.deadline())?;
        self.waiting.clear()
    }

    /// Order `id` at `ordered` and its first payment (`paid`, `at`) are both
    /// there: paid, or unpaid and late by the payment's event time.
    fn settle(id: u64, ordered: i64, paid: Cents, at: i64, ctx: &mut Context) -> Result<(), Error> {
        if at <= ordered + PAY_WITHIN {
            emit(ctx, id, "paid", Some(paid), at.max(ordered))
        } else {
            emit(ctx, id, "unpaid", None, ordered + PAY_WITHIN)?;
            emit(ctx, id, "late-payment", Some(paid), at)
        }
    }
}

#[function]
impl KeyFunction for OrderStatus {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        Ok(event.json::<OrderRef>()?.order_id.to_string().into_bytes())
    }
}

#[function]
impl TransformFunction for OrderStatus {
    /// Refunds and amounts of zero or less are dropped; the rest become
    /// `{"order_id","paid","at"}`.
    fn transform(&mut self, event: &Event, out: &mut Emitter) -> Result<(), Error> {
        let payment: RawPayment = event.json()?;
        let paid = Cents::parse(payment.amount.get())?;
        if payment.kind == Some("refund") || paid.0 <= 0 {
            return Ok(());
        }
        let compact = Payment {
            order_id: payment.order_id,
            paid: paid.to_json_number(),
            at: event.timestamp,
        };
        out.emit(Event::from_json(&compact, event.timestamp)?);
        Ok(())
    }
}

#[function]
impl CoProcessFunction for OrderStatus {
    /// Orders: settle with a waiting payment, or wait for one.
    fn process1(&mut self, key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
        let id = order_id(key)?;
        for order in events {
            match self.waiting.get()? {
                None => self.wait(Waiting::Order(order.timestamp), ctx)?,
                Some(waiting @ Waiting::Payment(cents, at)) => {
                    self.done(&waiting, ctx)?;
                    Self::settle(id, order.timestamp, Cents(cents), at, ctx)?;
                }
                Some(Waiting::Order(_) | Waiting::Unpaid(_)) => {
                    ctx.log(
                        LogLevel::Warn,
                        &format!("order {id} came twice; the second is ignored"),
                    );
                }
            }
        }
        Ok(())
    }

    /// Cleaned payments: settle with a waiting order, report a late one,
    /// or wait for the order (the first payment wins).
    fn process2(&mut self, key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
        let id = order_id(key)?;
        for event in events {
            let payment: Payment<&RawValue> = event.json()?;
            let paid = Cents::parse(payment.paid.get())?;
            match self.waiting.get()? {
                None => self.wait(Waiting::Payment(paid.0, payment.at), ctx)?,
                Some(waiting @ Waiting::Order(ordered)) => {
                    self.done(&waiting, ctx)?;
                    Self::settle(id, ordered, paid, payment.at, ctx)?;
                }
                Some(waiting @ Waiting::Unpaid(_)) => {
                    self.done(&waiting, ctx)?;
                    emit(ctx, id, "late-payment", Some(paid), payment.at)?;
                }
                Some(Waiting::Payment(..)) => {} // a payment is already waiting: it wins
            }
        }
        Ok(())
    }

    /// The wait is over: an order is unpaid (remembered for a late
    /// payment); an unpaid order or a lone payment is forgotten.
    fn on_timer(&mut self, key: &[u8], timer: FiredTimer, ctx: &mut Context) -> Result<(), Error> {
        let Some(waiting) = self.waiting.get()? else { return Ok(()) };
        if timer.timestamp != waiting.deadline() {
            return Ok(()); // a timer of a wait that is over
        }
        match waiting {
            Waiting::Order(ordered) => {
                emit(ctx, order_id(key)?, "unpaid", None, timer.timestamp)?;
                self.wait(Waiting::Unpaid(ordered), ctx)
            }
            Waiting::Payment(..) | Waiting::Unpaid(_) => self.waiting.clear(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;
    use weir_sdk::TimeDomain;

    const MIN: i64 = 60_000;

    fn order(id: u64, time: i64) -> Event {
        Event::new(format!(r#"{{"order_id":{id},"customer_id":3,"amount":12.50}}"#).into(), time)
    }

    fn payment(id: u64, paid: &str, time: i64) -> Event {
        Event::new(format!(r#"{{"order_id":{id},"paid":{paid},"at":{time}}}"#).into(), time)
    }

    fn lines(out: &[Event]) -> Vec<String> {
        out.iter().map(|e| String::from_utf8(e.value.clone()).unwrap()).collect()
    }

    #[test]
    fn the_key_is_the_order_id_of_every_shape() {
        let mut h = Harness::<OrderStatus>::new();
        assert_eq!(h.key(&order(7, 0)).unwrap(), b"7");
        assert_eq!(h.key(&payment(7, "1.00", 0)).unwrap(), b"7");
        let raw = r#"{"payment_id":"p7","order_id":7,"amount":12.50,"event_time":"x"}"#;
        assert_eq!(h.key(&Event::new(raw.into(), 0)).unwrap(), b"7");
        assert!(h.key(&Event::new(b"{}".to_vec(), 0)).is_err());
    }

    #[test]
    fn the_transform_drops_refunds_and_zero_amounts_and_reshapes_payments() {
        let mut h = Harness::<OrderStatus>::new();
        let line = |text: &str, time| Event::new(text.as_bytes().to_vec(), time);
        let out = h
            .transform(vec![
                line(r#"{"payment_id":"p1","order_id":1,"amount":12.5,"event_time":"t"}"#, 1000),
                line(r#"{"payment_id":"r1","order_id":1,"kind":"refund","amount":-12.50}"#, 2000),
                line(r#"{"payment_id":"r2","order_id":2,"kind":"refund","amount":3.00}"#, 2000),
                line(r#"{"payment_id":"z3","order_id":3,"amount":0.00}"#, 3000),
                line(r#"{"payment_id":"n4","order_id":4,"amount":-1}"#, 3000),
                line(r#"{"payment_id":"p5","order_id":5,"kind":"card","amount":7}"#, 4000),
            ])
            .unwrap();
        assert_eq!(
            lines(&out),
            vec![
                r#"{"order_id":1,"paid":12.50,"at":1000}"#,
                r#"{"order_id":5,"paid":7.00,"at":4000}"#,
            ]
        );
        assert_eq!(out[0].timestamp, 1000);
        assert!(h.transform(vec![line(r#"{"order_id":1,"amount":1.234}"#, 0)]).is_err());
        assert!(h.transform(vec![line("not json", 0)]).is_err());
    }

    #[test]
    fn an_order_paid_in_time_is_paid_once_and_its_state_cleared() {
        let mut h = Harness::<OrderStatus>::new();
        assert!(h.process1(b"1", vec![order(1, 0)]).unwrap().is_empty());
        assert_eq!(h.value::<Waiting>(b"1", "waiting"), Some(Waiting::Order(0)));
        assert_eq!(h.pending_timers(), vec![(TimeDomain::EventTime, PAY_WITHIN, b"1".to_vec())]);
        let out = h.process2(b"1", vec![payment(1, "12.50", 9 * MIN)]).unwrap();
        assert_eq!(lines(&out), vec![r#"{"order_id":1,"status":"paid","amount":12.50}"#]);
        assert_eq!(out[0].timestamp, 9 * MIN);
        assert_eq!(h.value::<Waiting>(b"1", "waiting"), None);
        assert!(h.pending_timers().is_empty());
        assert!(h.advance_watermark(2 * PAY_WITHIN).unwrap().is_empty());
        // A second payment waits for an order that is not coming, then is forgotten.
        let at = 11 * MIN;
        assert!(h.process2(b"1", vec![payment(1, "1.00", at)]).unwrap().is_empty());
        assert!(h.advance_watermark(at + KEEP_PAYMENT).unwrap().is_empty());
        assert_eq!(h.value::<Waiting>(b"1", "waiting"), None);
    }

    #[test]
    fn an_order_without_payment_is_unpaid_at_its_timer_and_a_late_payment_follows() {
        let mut h = Harness::<OrderStatus>::new();
        h.process1(b"2", vec![order(2, 0)]).unwrap();
        assert!(h.advance_watermark(PAY_WITHIN - 1).unwrap().is_empty());
        let out = h.advance_watermark(PAY_WITHIN).unwrap();
        assert_eq!(lines(&out), vec![r#"{"order_id":2,"status":"unpaid"}"#]);
        assert_eq!(out[0].timestamp, PAY_WITHIN);
        assert_eq!(h.value::<Waiting>(b"2", "waiting"), Some(Waiting::Unpaid(0)));
        let out = h.process2(b"2", vec![payment(2, "30.00", 25 * MIN)]).unwrap();
        assert_eq!(lines(&out), vec![r#"{"order_id":2,"status":"late-payment","amount":30.00}"#]);
        assert_eq!(h.value::<Waiting>(b"2", "waiting"), None);
        assert!(h.pending_timers().is_empty());

        // Never paid: the unpaid order is forgotten after an hour, silently.
        h.process1(b"3", vec![order(3, 0)]).unwrap();
        assert_eq!(h.advance_watermark(REMEMBER_UNPAID).unwrap().len(), 1);
        assert_eq!(h.value::<Waiting>(b"3", "waiting"), None);
        assert!(h.pending_timers().is_empty());
    }

    #[test]
    fn a_payment_before_its_order_waits_for_it_and_the_first_payment_wins() {
        let mut h = Harness::<OrderStatus>::new();
        assert!(h.process2(b"4", vec![payment(4, "5.00", 10 * MIN)]).unwrap().is_empty());
        assert!(h.process2(b"4", vec![payment(4, "6.00", 11 * MIN)]).unwrap().is_empty());
        assert_eq!(h.value::<Waiting>(b"4", "waiting"), Some(Waiting::Payment(500, 10 * MIN)));
        // The order is a minute after the payment: paid.
        let out = h.process1(b"4", vec![order(4, 11 * MIN)]).unwrap();
        assert_eq!(lines(&out), vec![r#"{"order_id":4,"status":"paid","amount":5.00}"#]);
        assert_eq!(h.value::<Waiting>(b"4", "waiting"), None);
        assert!(h.pending_timers().is_empty());
    }

    #[test]
    fn a_late_payment_is_late_by_event_time_whatever_arrives_first() {
        // The payment 20 minutes after the order, arriving before the timer
        // fired, or before the order: "unpaid" then "late-payment" as when
        // it arrives after the timer.
        let expected = vec![
            r#"{"order_id":5,"status":"unpaid"}"#.to_string(),
            r#"{"order_id":5,"status":"late-payment","amount":8.00}"#.to_string(),
        ];
        let mut h = Harness::<OrderStatus>::new();
        h.process1(b"5", vec![order(5, 0)]).unwrap();
        assert_eq!(lines(&h.process2(b"5", vec![payment(5, "8", 20 * MIN)]).unwrap()), expected);
        assert!(h.pending_timers().is_empty());
        assert!(h.advance_watermark(2 * REMEMBER_UNPAID).unwrap().is_empty());

        let mut h = Harness::<OrderStatus>::new();
        h.process2(b"5", vec![payment(5, "8", 20 * MIN)]).unwrap();
        assert_eq!(lines(&h.process1(b"5", vec![order(5, 0)]).unwrap()), expected);
        assert!(h.pending_timers().is_empty());

        let mut h = Harness::<OrderStatus>::new();
        h.process1(b"5", vec![order(5, 0)]).unwrap();
        let mut out = h.advance_watermark(19 * MIN).unwrap();
        out.extend(h.process2(b"5", vec![payment(5, "8", 20 * MIN)]).unwrap());
        assert_eq!(lines(&out), expected);
        assert_eq!(h.value::<Waiting>(b"5", "waiting"), None);
    }

    #[test]
    fn a_payment_whose_order_never_comes_is_forgotten() {
        let mut h = Harness::<OrderStatus>::new();
        h.process2(b"999", vec![payment(999, "5.00", 0)]).unwrap();
        assert!(h.advance_watermark(KEEP_PAYMENT).unwrap().is_empty());
        assert_eq!(h.value::<Waiting>(b"999", "waiting"), None);
        // An order after that waits for a payment of its own.
        h.process1(b"999", vec![order(999, KEEP_PAYMENT + 1)]).unwrap();
        assert_eq!(h.value::<Waiting>(b"999", "waiting"), Some(Waiting::Order(KEEP_PAYMENT + 1)));
    }
}
