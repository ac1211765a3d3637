//! Per-customer order profile.
//!
//! Input: the same JSON orders as `revenue`. Key: the customer id. State:
//! the customer's three most recent order ids (list state) and their number
//! of orders per UTC hour of day (map state). Output: one profile per
//! order, `{"customer_id":2,"order_id":113,"orders":2,"recent_orders":[111,113],"busiest_hour":10}`.
//! A customer's second and later order within the same hour also goes to
//! the side output `repeat-customers`.

use serde::{Deserialize, Serialize};
use weir_sdk::{
    function, Context, Error, Event, KeyFunction, ListState, LogLevel, MapState, ProcessFunction,
};

/// How many recent order ids a profile keeps.
pub const RECENT: usize = 3;

/// The name of the side output for repeat customers.
pub const REPEAT_CUSTOMERS: &str = "repeat-customers";

#[derive(Deserialize)]
struct Order {
    order_id: u64,
    customer_id: u64,
}

/// One output record.
#[derive(Serialize)]
struct Profile<'a> {
    customer_id: u64,
    order_id: u64,
    orders: u64,
    recent_orders: &'a [u64],
    busiest_hour: u8,
}

/// The function: recent orders and an hour-of-day histogram per customer.
pub struct CustomerProfile {
    recent: ListState<u64>,
    per_hour: MapState<u8, u64>,
}

impl Default for CustomerProfile {
    fn default() -> Self {
        Self { recent: ListState::new("recent-orders"), per_hour: MapState::new("orders-per-hour") }
    }
}

/// UTC hour of day of a timestamp in milliseconds since the epoch.
fn hour_of_day(timestamp: i64) -> u8 {
    (timestamp.div_euclid(3_600_000).rem_euclid(24)) as u8
}

#[function]
impl KeyFunction for CustomerProfile {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        Ok(event.json::<Order>()?.customer_id.to_string().into_bytes())
    }
}

#[function]
impl ProcessFunction for CustomerProfile {
    fn process(&mut self, key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
        let mut recent = self.recent.get()?;
        for event in events {
            let order: Order = event.json()?;
            let hour = hour_of_day(event.timestamp);
            let in_hour = self.per_hour.get(&hour)?.unwrap_or(0) + 1;
            self.per_hour.put(&hour, &in_hour)?;
            recent.push(order.order_id);
            if recent.len() > RECENT {
                recent.remove(0);
            }
            let histogram = self.per_hour.entries()?;
            let orders = histogram.iter().map(|(_, n)| n).sum();
            // Most orders wins; ties go to the earliest hour.
            let busiest_hour = histogram
                .iter()
                .max_by_key(|(h, n)| (*n, std::cmp::Reverse(*h)))
                .map_or(hour, |(h, _)| *h);
            let profile = Profile {
                customer_id: order.customer_id,
                order_id: order.order_id,
                orders,
                recent_orders: &recent,
                busiest_hour,
            };
            ctx.emit(Event::from_json(&profile, event.timestamp)?);
            if in_hour >= 2 {
                ctx.log(
                    LogLevel::Debug,
                    &format!(
                        "customer {} ordered {in_hour} times in hour {hour}",
                        String::from_utf8_lossy(key)
                    ),
                );
                ctx.emit_to(REPEAT_CUSTOMERS, event);
            }
        }
        self.recent.update(&recent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    const HOUR: i64 = 3_600_000;

    fn order(id: u64, customer: u64, timestamp: i64) -> Event {
        Event::new(
            format!(r#"{{"order_id":{id},"customer_id":{customer}}}"#).into_bytes(),
            timestamp,
        )
    }

    fn json(event: &Event) -> serde_json::Value {
        event.json().unwrap()
    }

    #[test]
    fn keeps_the_three_most_recent_orders_and_the_busiest_hour() {
        let mut harness = Harness::<CustomerProfile>::new();
        let out = harness
            .process(
                b"7",
                vec![order(1, 7, 10 * HOUR), order(2, 7, 11 * HOUR), order(3, 7, 11 * HOUR + 5)],
            )
            .unwrap();
        assert_eq!(json(&out[0])["busiest_hour"], 10);
        assert_eq!(json(&out[2])["busiest_hour"], 11);
        assert_eq!(json(&out[2])["orders"], 3);
        let out = harness.process(b"7", vec![order(4, 7, 34 * HOUR)]).unwrap();
        assert_eq!(json(&out[0])["recent_orders"], serde_json::json!([2, 3, 4]));
        assert_eq!(
            json(&out[0])["busiest_hour"],
            10,
            "hour 34 is 10:00 the next day: 10 and 11 have 2 each, the earliest wins"
        );
    }

    #[test]
    fn repeat_orders_in_an_hour_go_to_the_side_output() {
        let mut harness = Harness::<CustomerProfile>::new();
        harness.process(b"1", vec![order(1, 1, 0), order(2, 1, 60_000)]).unwrap();
        harness.process(b"2", vec![order(3, 2, 0)]).unwrap();
        let repeats = harness.take_side_output(REPEAT_CUSTOMERS);
        assert_eq!(repeats.len(), 1);
        assert_eq!(json(&repeats[0])["order_id"], 2);
        assert_eq!(harness.logs().len(), 1);
    }

    #[test]
    fn state_is_per_customer() {
        let mut harness = Harness::<CustomerProfile>::new();
        harness.process(b"1", vec![order(1, 1, 0)]).unwrap();
        let out = harness.process(b"2", vec![order(2, 2, 0)]).unwrap();
        assert_eq!(json(&out[0])["recent_orders"], serde_json::json!([2]));
        assert_eq!(json(&out[0])["orders"], 1);
    }
}
