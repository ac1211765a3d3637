//! Top three customers per region per window: stage two of a graph.
//!
//! The pipeline ([pipeline.yaml](../pipeline.yaml)) keys orders by customer
//! and computes each customer's running revenue with
//! [customer-revenue](../../customer-revenue); this function re-keys those
//! records by region and, over host-assigned event-time windows (1-minute
//! tumbling), keeps each customer's highest running revenue seen in the
//! window. When the window fires it emits the three highest (ties broken
//! by the lower customer id; fewer when fewer customers were active), with
//! timestamp `window_end - 1`:
//! `{"region":"eu","window_start":1768471200000,"window_end":1768471260000,"top":[{"customer_id":5,"revenue":310.25},…]}`.
//!
//! Input: `{"customer_id":5,"region":"eu","revenue":310.25,"event_time":"…"}`.
//! Key: the region. Accumulator: customer id → highest revenue in cents.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use weir_sdk::{function, AggregateFunction, Cents, Error, Event, KeyFunction, Window};

/// How many customers a result lists.
pub const TOP: usize = 3;

/// One running-revenue record from stage one.
#[derive(Deserialize)]
struct CustomerRevenue<'a> {
    customer_id: u64,
    region: &'a str,
    #[serde(borrow)]
    revenue: &'a RawValue,
}

/// One entry of a result.
#[derive(Serialize)]
struct Entry {
    customer_id: u64,
    revenue: Box<RawValue>,
}

/// One result: a region's top customers in a window.
#[derive(Serialize)]
struct RegionTop<'a> {
    region: &'a str,
    window_start: i64,
    window_end: i64,
    top: Vec<Entry>,
}

/// The function: keyed by region, the best revenue per customer per window.
#[derive(Default)]
pub struct RegionTop3;

#[function]
impl KeyFunction for RegionTop3 {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        Ok(event.json::<CustomerRevenue>()?.region.as_bytes().to_vec())
    }
}

#[function]
impl AggregateFunction for RegionTop3 {
    type Accumulator = BTreeMap<u64, i64>;

    fn add(&mut self, best: &mut BTreeMap<u64, i64>, event: &Event) -> Result<(), Error> {
        let record: CustomerRevenue = event.json()?;
        let revenue = Cents::parse(record.revenue.get())?.0;
        let entry = best.entry(record.customer_id).or_insert(revenue);
        *entry = (*entry).max(revenue);
        Ok(())
    }

    fn merge(
        &mut self,
        mut a: BTreeMap<u64, i64>,
        b: BTreeMap<u64, i64>,
    ) -> Result<BTreeMap<u64, i64>, Error> {
        for (customer, revenue) in b {
            let entry = a.entry(customer).or_insert(revenue);
            *entry = (*entry).max(revenue);
        }
        Ok(a)
    }

    fn result(
        &mut self,
        key: &[u8],
        window: Window,
        best: BTreeMap<u64, i64>,
    ) -> Result<Vec<Event>, Error> {
        let mut ranked: Vec<(u64, i64)> = best.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let top = ranked
            .into_iter()
            .take(TOP)
            .map(|(customer_id, cents)| Entry {
                customer_id,
                revenue: Cents(cents).to_json_number(),
            })
            .collect();
        let out = RegionTop {
            region: std::str::from_utf8(key)?,
            window_start: window.start,
            window_end: window.end,
            top,
        };
        Ok(vec![Event::from_json(&out, window.end - 1)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    fn revenue(customer: u64, amount: &str) -> Event {
        let text = format!(
            r#"{{"customer_id":{customer},"region":"eu","revenue":{amount},"event_time":"2026-01-15T10:00:00Z"}}"#
        );
        Event::new(text.into_bytes(), 0)
    }

    fn text(event: &Event) -> String {
        String::from_utf8(event.value.clone()).unwrap()
    }

    #[test]
    fn keys_by_region() {
        let mut harness = Harness::<RegionTop3>::new();
        assert_eq!(harness.key(&revenue(1, "1.00")).unwrap(), b"eu");
        assert!(harness.key(&Event::new(br#"{"customer_id":1}"#.to_vec(), 0)).is_err());
    }

    #[test]
    fn ranks_each_customers_best_revenue_and_breaks_ties_by_customer_id() {
        let mut harness = Harness::<RegionTop3>::new();
        let events = vec![
            revenue(9, "50.00"),
            revenue(1, "20.00"),
            revenue(5, "30.00"),
            revenue(1, "70.00"), // customer 1's revenue grew: 70.00 counts
            revenue(7, "30.00"), // ties with 5 and loses (higher id)
            revenue(2, "10.00"),
        ];
        let out = harness.aggregate(b"eu", Window { start: 0, end: 60_000 }, events).unwrap();
        assert_eq!(
            text(&out[0]),
            r#"{"region":"eu","window_start":0,"window_end":60000,"top":[{"customer_id":1,"revenue":70.00},{"customer_id":9,"revenue":50.00},{"customer_id":5,"revenue":30.00}]}"#
        );
        assert_eq!(out[0].timestamp, 59_999);
    }

    #[test]
    fn lists_fewer_when_fewer_customers_were_active() {
        let mut harness = Harness::<RegionTop3>::new();
        let out = harness
            .aggregate(b"eu", Window { start: 0, end: 60_000 }, vec![revenue(4, "0.10")])
            .unwrap();
        assert_eq!(
            text(&out[0]),
            r#"{"region":"eu","window_start":0,"window_end":60000,"top":[{"customer_id":4,"revenue":0.10}]}"#
        );
    }

    #[test]
    fn merging_keeps_the_higher_revenue_per_customer() {
        let mut harness = Harness::<RegionTop3>::new();
        let a = BTreeMap::from([(1, 500), (2, 900)]);
        let b = BTreeMap::from([(1, 700), (3, 100)]);
        let merged = harness.function().merge(a, b).unwrap();
        assert_eq!(merged, BTreeMap::from([(1, 700), (2, 900), (3, 100)]));
    }
}
