//! Per-customer running revenue.
//!
//! Input: JSON orders `{"order_id", "customer_id", "amount", "event_time"}`.
//! Key: the customer id. State: the customer's total in integer cents.
//! Output: one record per order with the customer's new total:
//! `{"order_id":114,"customer_id":1,"amount":30.00,"total":50.00}`.
//!
//! Amounts are parsed from their decimal text into cents, never through
//! floating point, so totals do not drift.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use weir_sdk::{function, Context, Error, Event, KeyFunction, ProcessFunction, ValueState};

/// An amount of money in integer cents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cents(pub i64);

impl Cents {
    /// Parse a decimal amount such as `20`, `7.5` or `-12.25` (at most two
    /// decimals; a JSON string holding such a number is accepted too).
    pub fn parse(text: &str) -> Result<Self, Error> {
        let text = text.trim().trim_matches('"');
        let bad = || Error::msg(format!("amount {text:?} is not a decimal with at most two decimals"));
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        if whole.is_empty() || fraction.len() > 2 || !whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let whole: i64 = whole.parse().map_err(|_| bad())?;
        let fraction: i64 = format!("{fraction:0<2}").parse().map_err(|_| bad())?;
        let cents = whole.checked_mul(100).and_then(|c| c.checked_add(fraction)).ok_or_else(bad)?;
        Ok(Self(if negative { -cents } else { cents }))
    }

    /// The amount as JSON number text with two decimals, e.g. `50.00`.
    pub fn to_json_number(self) -> Box<RawValue> {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        RawValue::from_string(format!("{sign}{}.{:02}", abs / 100, abs % 100)).expect("a decimal is valid JSON")
    }
}

/// One order as read from the source.
#[derive(Deserialize)]
struct Order<'a> {
    order_id: u64,
    customer_id: u64,
    #[serde(borrow)]
    amount: &'a RawValue,
}

/// One output record: the order and the customer's total after it.
#[derive(Serialize)]
struct RunningTotal {
    order_id: u64,
    customer_id: u64,
    amount: Box<RawValue>,
    total: Box<RawValue>,
}

/// The function: keyed by customer, keeping each customer's total.
pub struct Revenue {
    total: ValueState<i64>,
}

impl Default for Revenue {
    fn default() -> Self {
        Self { total: ValueState::new("total") }
    }
}

#[function]
impl KeyFunction for Revenue {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        let order: Order = serde_json::from_slice(&event.value)?;
        Ok(order.customer_id.to_string().into_bytes())
    }
}

#[function]
impl ProcessFunction for Revenue {
    fn process(&mut self, _key: &[u8], events: Vec<Event>, ctx: &mut Context) -> Result<(), Error> {
        let mut total = self.total.get()?.unwrap_or(0);
        for event in events {
            let order: Order = serde_json::from_slice(&event.value)?;
            let amount = Cents::parse(order.amount.get())?;
            total = total.checked_add(amount.0).ok_or_else(|| Error::msg("total overflows"))?;
            let out = RunningTotal {
                order_id: order.order_id,
                customer_id: order.customer_id,
                amount: amount.to_json_number(),
                total: Cents(total).to_json_number(),
            };
            ctx.emit(Event::from_json(&out, event.timestamp)?);
        }
        self.total.set(&total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    fn order(id: u64, customer: u64, amount: &str) -> Event {
        let text = format!(r#"{{"order_id":{id},"customer_id":{customer},"amount":{amount},"event_time":"2026-01-15T10:00:05Z"}}"#);
        Event::new(text.into_bytes(), 0)
    }

    #[test]
    fn parses_amounts_exactly() {
        assert_eq!(Cents::parse("20.00").unwrap(), Cents(2000));
        assert_eq!(Cents::parse("7.5").unwrap(), Cents(750));
        assert_eq!(Cents::parse("\"12\"").unwrap(), Cents(1200));
        assert_eq!(Cents::parse("-0.05").unwrap(), Cents(-5));
        assert_eq!(Cents(-5).to_json_number().get(), "-0.05");
        for bad in ["1.234", "abc", "", "1e3", "--1", "."] {
            assert!(Cents::parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn keys_by_customer() {
        let mut harness = Harness::<Revenue>::new();
        assert_eq!(harness.key(&order(110, 1, "20.00")).unwrap(), b"1");
        assert!(harness.key(&Event::new(b"{}".to_vec(), 0)).is_err());
    }

    #[test]
    fn keeps_a_running_total_per_customer() {
        let mut harness = Harness::<Revenue>::new();
        let out = harness.process(b"2", vec![order(111, 2, "15.50"), order(113, 2, "12.50")]).unwrap();
        let totals: Vec<serde_json::Value> = out.iter().map(|e| e.json().unwrap()).collect();
        assert_eq!(totals[0]["total"].to_string(), "15.5");
        assert_eq!(totals[1]["total"].to_string(), "28.0");
        harness.process(b"1", vec![order(110, 1, "20.00")]).unwrap();
        harness.process(b"2", vec![order(151, 2, "20.00")]).unwrap();
        assert_eq!(harness.value::<i64>(b"2", "total"), Some(4800));
        assert_eq!(harness.value::<i64>(b"1", "total"), Some(2000));
    }

    #[test]
    fn outputs_two_decimals() {
        let mut harness = Harness::<Revenue>::new();
        let out = harness.process(b"3", vec![order(112, 3, "7.25"), order(150, 3, "9.75")]).unwrap();
        assert_eq!(String::from_utf8(out[1].value.clone()).unwrap(), r#"{"order_id":150,"customer_id":3,"amount":9.75,"total":17.00}"#);
    }
}
