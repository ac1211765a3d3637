//! Orders joined with their payments: the key function of an interval join.
//!
//! The pipeline ([pipeline.yaml](../pipeline.yaml)) reads two files,
//! `orders.jsonl` and `payments.jsonl`, keys both by order id with this
//! function and joins them in the host (`join: { type: interval, lower: 0s,
//! upper: 10m }`): each payment made within ten minutes after its order
//! (both bounds inclusive) gives one `{"left":<order>,"right":<payment>}`
//! record, timestamped with the later of the two.
//!
//! Input, either shape:
//! `{"order_id":7,"customer_id":3,"amount":12.50,"event_time":"2026-01-15T10:00:00Z"}` (an order) or
//! `{"payment_id":"p7","order_id":7,"amount":12.50,"event_time":"2026-01-15T10:01:30Z"}` (a payment).
//! Key: the order id as decimal text (`7`). The function keeps no state:
//! the join keeps both sides, and drops them once the watermark passes.

use serde::Deserialize;
use weir_sdk::{function, Error, Event, KeyFunction};

/// The field orders and payments share.
#[derive(Deserialize)]
struct OrderRef {
    order_id: u64,
}

/// The function: keys orders and payments by order id.
#[derive(Default)]
pub struct OrdersPayments;

#[function]
impl KeyFunction for OrdersPayments {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        Ok(event.json::<OrderRef>()?.order_id.to_string().into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    fn event(text: &str) -> Event {
        Event::new(text.as_bytes().to_vec(), 0)
    }

    #[test]
    fn keys_orders_and_payments_alike() {
        let mut harness = Harness::<OrdersPayments>::new();
        let order = event(
            r#"{"order_id":7,"customer_id":3,"amount":12.50,"event_time":"2026-01-15T10:00:00Z"}"#,
        );
        let payment = event(
            r#"{"payment_id":"p7","order_id":7,"amount":12.50,"event_time":"2026-01-15T10:01:30Z"}"#,
        );
        assert_eq!(harness.key(&order).unwrap(), b"7");
        assert_eq!(harness.key(&payment).unwrap(), b"7");
        assert_eq!(harness.key(&event(r#"{"order_id":1234567}"#)).unwrap(), b"1234567");
    }

    #[test]
    fn refuses_events_without_an_order_id() {
        let mut harness = Harness::<OrdersPayments>::new();
        assert!(harness.key(&event(r#"{"payment_id":"p7","amount":1.00}"#)).is_err());
        assert!(harness.key(&event(r#"{"order_id":"7"}"#)).is_err());
        assert!(harness.key(&event("not json")).is_err());
    }
}
