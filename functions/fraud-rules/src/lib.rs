//! Fraud rules from a broadcast input, after Flink's broadcast state
//! pattern: every subtask of the detector holds every rule currently in
//! force, and rules change while the pipeline runs.
//!
//! Inputs (see `pipeline.yaml`):
//! * `transactions`, keyed by account:
//!   `{"transaction_id":1,"account_id":"a1","amount":620.00,"time":"2026-01-15T10:02:00Z"}`;
//! * `rules`, broadcast to every subtask. `{"rule_id":"big","max_amount":500.00}`
//!   sets (or replaces) a rule; `{"rule_id":"big","delete":true}` removes it.
//!
//! A transaction whose amount is above a rule's `max_amount` breaks that
//! rule. Output: one alert per (transaction, rule broken), rules in
//! `rule_id` order, with the account's running number of alerts (kept in
//! keyed value state):
//! `{"account_id":"a1","transaction_id":1,"rule_id":"big","amount":620.00,"account_alerts":1}`.
//!
//! Rules are kept in [`BroadcastState`] (written by `process_broadcast`,
//! read for every account). A rule applies from the moment its event
//! reaches the detector: the runtime hands broadcast events to a subtask
//! in arrival order, not ordered with the transactions by event time. The
//! example data (`rules.jsonl`, `transactions.jsonl`) therefore leaves at
//! least a minute of event time between a rule change and the
//! transactions around it, and `expected.py` computes
//! `expected-alerts.jsonl` by replaying both files in event-time order.
//!
//! The component exports the key function (the account) and the broadcast
//! process function.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use weir_sdk::{
    function, BroadcastProcessFunction, BroadcastState, Cents, Context, Error, Event, KeyFunction,
    ProcessFunction, ValueState,
};

/// One transaction.
#[derive(Deserialize)]
struct Transaction<'a> {
    transaction_id: u64,
    account_id: &'a str,
    #[serde(borrow)]
    amount: &'a RawValue,
}

/// One rule change.
#[derive(Deserialize)]
struct RuleChange<'a> {
    rule_id: String,
    #[serde(borrow, default)]
    max_amount: Option<&'a RawValue>,
    #[serde(default)]
    delete: bool,
}

/// One alert.
#[derive(Serialize)]
struct Alert<'a> {
    account_id: &'a str,
    transaction_id: u64,
    rule_id: &'a str,
    amount: Box<RawValue>,
    account_alerts: u64,
}

/// The function: the rules in force (broadcast) and, per account, how
/// many alerts it has raised.
pub struct FraudRules {
    /// Rule id → largest amount allowed, in cents.
    rules: BroadcastState<String, Cents>,
    /// Alerts raised so far for the account.
    alerts: ValueState<u64>,
}

impl Default for FraudRules {
    fn default() -> Self {
        Self { rules: BroadcastState::new("rules"), alerts: ValueState::new("alerts") }
    }
}

#[function]
impl KeyFunction for FraudRules {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        Ok(event.json::<Transaction>()?.account_id.as_bytes().to_vec())
    }
}

impl ProcessFunction for FraudRules {
    fn process(&mut self, _key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
        // Entries come in the byte order of the encoded ids (shorter first).
        let mut rules = self.rules.entries()?;
        rules.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut alerts = self.alerts.get()?.unwrap_or(0);
        let before = alerts;
        for event in events {
            let tx: Transaction = serde_json::from_slice(&event.value)?;
            let amount = Cents::parse(tx.amount.get())?;
            for (rule_id, _) in rules.iter().filter(|(_, max)| amount > *max) {
                alerts += 1;
                let alert = Alert {
                    account_id: tx.account_id,
                    transaction_id: tx.transaction_id,
                    rule_id,
                    amount: amount.to_json_number(),
                    account_alerts: alerts,
                };
                ctx.emit(Event::from_json(&alert, event.timestamp)?);
            }
        }
        if alerts != before {
            self.alerts.set(&alerts)?;
        }
        Ok(())
    }
}

#[function]
impl BroadcastProcessFunction for FraudRules {
    fn process_broadcast(&mut self, event: &Event, _ctx: &mut Context) -> Result<(), Error> {
        let change: RuleChange = serde_json::from_slice(&event.value)?;
        if change.rule_id.is_empty() {
            return Err(Error::msg("a rule needs a non-empty `rule_id`"));
        }
        match (change.delete, change.max_amount) {
            (true, _) => self.rules.remove(&change.rule_id),
            (false, Some(max)) => self.rules.put(&change.rule_id, &Cents::parse(max.get())?),
            (false, None) => Err(Error::msg(format!(
                "rule {:?} has no `max_amount` (or `\"delete\":true` to remove it)",
                change.rule_id
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    fn tx(id: u64, account: &str, amount: &str) -> Event {
        Event::new(
            format!(r#"{{"transaction_id":{id},"account_id":"{account}","amount":{amount}}}"#)
                .into_bytes(),
            id as i64 * 1000,
        )
    }

    fn rule(json: &str) -> Event {
        Event::new(json.as_bytes().to_vec(), 0)
    }

    /// (transaction id, rule id, account alerts) of each alert.
    fn alerts(out: &[Event]) -> Vec<(u64, String, u64)> {
        out.iter()
            .map(|e| {
                let v: serde_json::Value = e.json().unwrap();
                (
                    v["transaction_id"].as_u64().unwrap(),
                    v["rule_id"].as_str().unwrap().to_string(),
                    v["account_alerts"].as_u64().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn alerts_follow_the_rules_as_they_change() {
        let mut h = Harness::<FraudRules>::new();
        assert!(h.process(b"a", vec![tx(1, "a", "10000.00")]).unwrap().is_empty(), "no rules yet");
        h.process_broadcast(vec![rule(r#"{"rule_id":"big","max_amount":500.00}"#)]).unwrap();
        let out = h.process(b"a", vec![tx(2, "a", "500.00"), tx(3, "a", "500.01")]).unwrap();
        assert_eq!(alerts(&out), vec![(3, "big".into(), 1)]);
        let alert: serde_json::Value = out[0].json().unwrap();
        assert_eq!(alert["amount"].to_string(), "500.01");
        assert_eq!(out[0].timestamp, 3000);

        // A rule added, then a threshold lowered: both apply from then on.
        h.process_broadcast(vec![
            rule(r#"{"rule_id":"another","max_amount":50}"#),
            rule(r#"{"rule_id":"big","max_amount":300.00}"#),
        ])
        .unwrap();
        let out = h.process(b"a", vec![tx(4, "a", "400.00")]).unwrap();
        assert_eq!(alerts(&out), vec![(4, "another".into(), 2), (4, "big".into(), 3)]);
        let out = h.process(b"b", vec![tx(5, "b", "60.00")]).unwrap();
        assert_eq!(alerts(&out), vec![(5, "another".into(), 1)], "counts are per account");

        // A deleted rule no longer alerts.
        h.process_broadcast(vec![rule(r#"{"rule_id":"another","delete":true}"#)]).unwrap();
        assert!(h.process(b"b", vec![tx(6, "b", "60.00")]).unwrap().is_empty());
        assert_eq!(h.value::<u64>(b"a", "alerts"), Some(3));
        assert_eq!(h.broadcast_value::<String, Cents>("rules", &"big".into()), Some(Cents(30000)));
    }

    #[test]
    fn bad_rules_are_errors() {
        let mut h = Harness::<FraudRules>::new();
        let missing = h.process_broadcast(vec![rule(r#"{"rule_id":"x"}"#)]).unwrap_err();
        assert!(missing.to_string().contains("has no `max_amount`"), "{missing}");
        assert!(h
            .process_broadcast(vec![rule(r#"{"rule_id":"x","max_amount":"1.234"}"#)])
            .is_err());
        assert!(h.process_broadcast(vec![rule("not json")]).is_err());
    }

    #[test]
    fn the_key_is_the_account() {
        let mut h = Harness::<FraudRules>::new();
        assert_eq!(h.key(&tx(1, "a7", "1.00")).unwrap(), b"a7");
    }
}
