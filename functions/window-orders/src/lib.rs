//! A window process function: it sees every order of a customer's window
//! at once and ranks them, which an accumulator could not do cheaply.
//!
//! Output per (customer, window):
//! `{"customer_id":3,"window_start":…,"orders_by_amount":[112,117],"largest":7.25}`.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use weir_sdk::{function, Cents, Error, Event, KeyFunction, Window, WindowProcessFunction};

#[derive(Deserialize)]
struct Order<'a> {
    order_id: u64,
    customer_id: u64,
    #[serde(borrow)]
    amount: &'a RawValue,
}

#[derive(Serialize)]
struct Ranking {
    customer_id: u64,
    window_start: i64,
    orders_by_amount: Vec<u64>,
    largest: Box<RawValue>,
}

/// The function: keyed by customer, ranking each window's orders.
#[derive(Default)]
pub struct WindowOrders;

#[function]
impl KeyFunction for WindowOrders {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        Ok(event.json::<Order>()?.customer_id.to_string().into_bytes())
    }
}

#[function]
impl WindowProcessFunction for WindowOrders {
    fn process_window(
        &mut self,
        key: &[u8],
        window: Window,
        events: Vec<Event>,
    ) -> Result<Vec<Event>, Error> {
        let mut orders = events
            .iter()
            .map(|event| {
                let order: Order = event.json()?;
                Ok((Cents::parse(order.amount.get())?, order.order_id))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        orders.sort_by(|a, b| b.cmp(a));
        let largest = orders.first().map_or(Cents(0), |(amount, _)| *amount);
        let ranking = Ranking {
            customer_id: std::str::from_utf8(key)?.parse()?,
            window_start: window.start,
            orders_by_amount: orders.into_iter().map(|(_, id)| id).collect(),
            largest: largest.to_json_number(),
        };
        Ok(vec![Event::from_json(&ranking, window.end - 1)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    #[test]
    fn ranks_a_windows_orders_largest_first() {
        let mut harness = Harness::<WindowOrders>::new();
        let order = |id: u64, amount: &str| {
            Event::new(
                format!(r#"{{"order_id":{id},"customer_id":3,"amount":{amount}}}"#).into_bytes(),
                0,
            )
        };
        let out = harness
            .process_window(
                b"3",
                Window { start: 0, end: 60_000 },
                vec![order(1, "1.00"), order(2, "7.25"), order(3, "2.50")],
            )
            .unwrap();
        assert_eq!(
            String::from_utf8(out[0].value.clone()).unwrap(),
            r#"{"customer_id":3,"window_start":0,"orders_by_amount":[2,3,1],"largest":7.25}"#
        );
    }
}
