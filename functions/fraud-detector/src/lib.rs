//! Fraud detection, after Apache Flink's classic walkthrough.
//!
//! Fraudsters test a stolen card with a tiny purchase, then make a large
//! one. Per account, a transaction under 1.00 followed — as the very next
//! transaction of that account, within one minute of event time — by one
//! over 500.00 raises an alert. Any other transaction resets the watch.
//!
//! Input: `{"transaction_id":1,"account_id":"a1","amount":0.50,"time":"2026-01-15T10:00:00Z"}`.
//! Key: the account. State: the pending small transaction (id and event
//! time) in a value state with a one-minute TTL, so accounts that go quiet
//! cost nothing. Output: one alert per detection,
//! `{"account_id":"a1","transaction_id":2,"small_transaction_id":1,"amount":600.00,"seconds_after_small":30}`.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use weir_sdk::{
    function, Cents, Context, Error, Event, KeyFunction, ProcessFunction, Ttl, ValueState,
};

/// Transactions below this are "small".
pub const SMALL: Cents = Cents(100);
/// Transactions above this are "large".
pub const LARGE: Cents = Cents(50_000);
/// How soon after the small transaction the large one must come.
pub const WINDOW: Duration = Duration::from_secs(60);

#[derive(Deserialize)]
struct Transaction<'a> {
    transaction_id: u64,
    account_id: &'a str,
    #[serde(borrow)]
    amount: &'a RawValue,
}

/// One alert.
#[derive(Serialize)]
struct Alert<'a> {
    account_id: &'a str,
    transaction_id: u64,
    small_transaction_id: u64,
    amount: Box<RawValue>,
    seconds_after_small: i64,
}

/// The function: per account, the small transaction being watched.
pub struct FraudDetector {
    /// `(transaction id, event time)` of the last small transaction.
    pending_small: ValueState<(u64, i64)>,
}

impl Default for FraudDetector {
    fn default() -> Self {
        Self { pending_small: ValueState::with_ttl("pending-small", Ttl::after_write(WINDOW)) }
    }
}

#[function]
impl KeyFunction for FraudDetector {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        Ok(event.json::<Transaction>()?.account_id.as_bytes().to_vec())
    }
}

#[function]
impl ProcessFunction for FraudDetector {
    fn process(&mut self, _key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
        let mut pending = self.pending_small.get()?;
        for event in events {
            let tx: Transaction = serde_json::from_slice(&event.value)?;
            let amount = Cents::parse(tx.amount.get())?;
            if let Some((small_id, small_at)) = pending.take() {
                let elapsed = event.timestamp - small_at;
                if amount > LARGE && (0..=WINDOW.as_millis() as i64).contains(&elapsed) {
                    let alert = Alert {
                        account_id: tx.account_id,
                        transaction_id: tx.transaction_id,
                        small_transaction_id: small_id,
                        amount: amount.to_json_number(),
                        seconds_after_small: elapsed / 1000,
                    };
                    ctx.emit(Event::from_json(&alert, event.timestamp)?);
                }
            }
            if amount < SMALL {
                pending = Some((tx.transaction_id, event.timestamp));
            }
        }
        match pending {
            Some(small) => self.pending_small.set(&small),
            None => self.pending_small.clear(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    fn tx(id: u64, account: &str, amount: &str, second: i64) -> Event {
        Event::new(
            format!(r#"{{"transaction_id":{id},"account_id":"{account}","amount":{amount}}}"#)
                .into_bytes(),
            second * 1000,
        )
    }

    fn alerted(out: &[Event]) -> Vec<u64> {
        out.iter()
            .map(|e| e.json::<serde_json::Value>().unwrap()["transaction_id"].as_u64().unwrap())
            .collect()
    }

    #[test]
    fn small_then_large_within_a_minute_alerts() {
        let mut harness = Harness::<FraudDetector>::new();
        let out =
            harness.process(b"a", vec![tx(1, "a", "0.50", 0), tx(2, "a", "600.00", 30)]).unwrap();
        assert_eq!(alerted(&out), vec![2]);
        let alert: serde_json::Value = out[0].json().unwrap();
        assert_eq!(alert["small_transaction_id"], 1);
        assert_eq!(alert["seconds_after_small"], 30);
    }

    #[test]
    fn the_pattern_can_span_batches() {
        let mut harness = Harness::<FraudDetector>::new();
        assert!(harness.process(b"a", vec![tx(1, "a", "0.01", 0)]).unwrap().is_empty());
        assert_eq!(
            alerted(&harness.process(b"a", vec![tx(2, "a", "999.99", 60)]).unwrap()),
            vec![2]
        );
    }

    #[test]
    fn other_transactions_too_late_or_not_large_enough_do_not_alert() {
        let mut harness = Harness::<FraudDetector>::new();
        let reset = harness
            .process(
                b"a",
                vec![tx(1, "a", "0.50", 0), tx(2, "a", "20.00", 1), tx(3, "a", "700.00", 2)],
            )
            .unwrap();
        let late =
            harness.process(b"b", vec![tx(4, "b", "0.10", 0), tx(5, "b", "900.00", 61)]).unwrap();
        let boundary = harness
            .process(
                b"c",
                vec![
                    tx(6, "c", "1.00", 0),
                    tx(7, "c", "800.00", 1),
                    tx(8, "c", "0.20", 2),
                    tx(9, "c", "500.00", 3),
                ],
            )
            .unwrap();
        assert!(reset.is_empty() && late.is_empty() && boundary.is_empty());
    }
}
