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
//! read for every account) as versions by event time: a change at time T
//! is in force for transactions at T and after, until the next change.
//! The runtime hands broadcast events to a subtask as they arrive, not
//! ordered with the transactions, so a transaction waits in keyed state
//! (with an event-time timer) until event time — the least watermark of
//! both inputs — has passed it: by then every rule change up to its time
//! has arrived. The alerts are therefore the same whatever the
//! interleaving and parallelism; `expected.py` computes
//! `expected-alerts.jsonl` by replaying both files in event-time order.
//!
//! The component exports the key function (the account) and the broadcast
//! process function.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use weir_sdk::{
    function, BroadcastProcessFunction, BroadcastState, Cents, Context, Error, Event, FiredTimer,
    KeyFunction, ListState, ProcessFunction, ValueState,
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

/// Each version of a rule: from which event time on (ms) it is in force,
/// and its largest allowed amount (`None`: deleted from then on).
type Versions = Vec<(i64, Option<Cents>)>;

/// The function: every version of every rule (broadcast), and per account
/// the transactions waiting for event time to pass them and how many
/// alerts it has raised.
pub struct FraudRules {
    /// Rule id → its versions, oldest first.
    rules: BroadcastState<String, Versions>,
    /// Transactions (event time, value) waiting for the watermark.
    waiting: ListState<(i64, Vec<u8>)>,
    /// Alerts raised so far for the account.
    alerts: ValueState<u64>,
}

impl Default for FraudRules {
    fn default() -> Self {
        Self {
            rules: BroadcastState::new("rules"),
            waiting: ListState::new("waiting"),
            alerts: ValueState::new("alerts"),
        }
    }
}

#[function]
impl KeyFunction for FraudRules {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        Ok(event.json::<Transaction>()?.account_id.as_bytes().to_vec())
    }
}

impl FraudRules {
    /// Check the transactions `due` (event time, value), oldest first,
    /// against the rules in force at each one's event time.
    fn check(&mut self, due: &[(i64, Vec<u8>)], ctx: &mut Context) -> Result<(), Error> {
        // Entries come in the byte order of the encoded ids (shorter first).
        let mut rules = self.rules.entries()?;
        rules.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut alerts = self.alerts.get()?.unwrap_or(0);
        let before = alerts;
        for (time, value) in due {
            let tx: Transaction = serde_json::from_slice(value)?;
            let amount = Cents::parse(tx.amount.get())?;
            for (rule_id, versions) in &rules {
                let in_force = versions.iter().rev().find(|(from, _)| from <= time);
                if !matches!(in_force, Some((_, Some(max))) if amount > *max) {
                    continue;
                }
                alerts += 1;
                let alert = Alert {
                    account_id: tx.account_id,
                    transaction_id: tx.transaction_id,
                    rule_id,
                    amount: amount.to_json_number(),
                    account_alerts: alerts,
                };
                ctx.emit(Event::from_json(&alert, *time)?);
            }
        }
        if alerts != before {
            self.alerts.set(&alerts)?;
        }
        Ok(())
    }
}

impl ProcessFunction for FraudRules {
    /// A transaction is checked once event time has passed it: by then
    /// every rule change up to its time has arrived (event time is the
    /// least watermark of the transactions and the rules).
    fn process(&mut self, _key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
        let watermark = ctx.current_watermark();
        let mut due = Vec::new();
        for event in events {
            if event.timestamp <= watermark {
                due.push((event.timestamp, event.value.clone()));
            } else {
                self.waiting.add(&(event.timestamp, event.value.clone()))?;
                ctx.register_event_time_timer(event.timestamp)?;
            }
        }
        self.check(&due, ctx)
    }

    fn on_timer(&mut self, _key: &[u8], timer: FiredTimer, ctx: &mut Context) -> Result<(), Error> {
        let (mut due, later): (Vec<_>, Vec<_>) =
            self.waiting.get()?.into_iter().partition(|(time, _)| *time <= timer.timestamp);
        if later.is_empty() {
            self.waiting.clear()?;
        } else {
            self.waiting.update(&later)?;
        }
        // Oldest first; transactions of one time in arrival order.
        due.sort_by_key(|(time, _)| *time);
        self.check(&due, ctx)
    }
}

#[function]
impl BroadcastProcessFunction for FraudRules {
    /// A rule change is a new version of the rule, in force from the
    /// change's event time on.
    fn process_broadcast(&mut self, event: &Event, _ctx: &mut Context) -> Result<(), Error> {
        let change: RuleChange = serde_json::from_slice(&event.value)?;
        if change.rule_id.is_empty() {
            return Err(Error::msg("a rule needs a non-empty `rule_id`"));
        }
        let version = match (change.delete, change.max_amount) {
            (true, _) => None,
            (false, Some(max)) => Some(Cents::parse(max.get())?),
            (false, None) => {
                return Err(Error::msg(format!(
                    "rule {:?} has no `max_amount` (or `\"delete\":true` to remove it)",
                    change.rule_id
                )))
            }
        };
        let mut versions = self.rules.get(&change.rule_id)?.unwrap_or_default();
        let at = versions.partition_point(|(from, _)| *from <= event.timestamp);
        versions.insert(at, (event.timestamp, version));
        self.rules.put(&change.rule_id, &versions)
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

    fn rule(json: &str, time: i64) -> Event {
        Event::new(json.as_bytes().to_vec(), time)
    }

    #[test]
    fn alerts_follow_the_rules_in_force_at_each_transactions_event_time() {
        let mut h = Harness::<FraudRules>::new();
        // Transactions wait for event time to pass them.
        assert!(h.process(b"a", vec![tx(1, "a", "10000.00")]).unwrap().is_empty());
        // A rule from 2 s on arrives after the transaction at 1 s: too late for it.
        h.process_broadcast(vec![rule(r#"{"rule_id":"big","max_amount":500.00}"#, 2000)]).unwrap();
        assert!(h.advance_watermark(1000).unwrap().is_empty(), "no rule was in force at 1 s");
        let out = h.process(b"a", vec![tx(2, "a", "500.00"), tx(3, "a", "500.01")]).unwrap();
        assert!(out.is_empty(), "event time has not passed them");
        let out = h.advance_watermark(3000).unwrap();
        assert_eq!(alerts(&out), vec![(3, "big".into(), 1)]);
        let alert: serde_json::Value = out[0].json().unwrap();
        assert_eq!(alert["amount"].to_string(), "500.01");
        assert_eq!(out[0].timestamp, 3000);

        // A rule added and a threshold lowered from 4 s on, arriving after
        // a transaction at 5 s: they apply to it all the same.
        assert!(h.process(b"a", vec![tx(5, "a", "400.00")]).unwrap().is_empty());
        h.process_broadcast(vec![
            rule(r#"{"rule_id":"another","max_amount":50}"#, 4000),
            rule(r#"{"rule_id":"big","max_amount":300.00}"#, 4000),
        ])
        .unwrap();
        let out = h.advance_watermark(5000).unwrap();
        assert_eq!(alerts(&out), vec![(5, "another".into(), 2), (5, "big".into(), 3)]);
        h.process(b"b", vec![tx(6, "b", "60.00")]).unwrap();
        let out = h.advance_watermark(6000).unwrap();
        assert_eq!(alerts(&out), vec![(6, "another".into(), 1)], "counts are per account");

        // A deleted rule no longer alerts from its deletion on; a
        // transaction already behind event time is checked at once.
        h.process_broadcast(vec![rule(r#"{"rule_id":"another","delete":true}"#, 7000)]).unwrap();
        h.advance_watermark(8000).unwrap();
        assert!(h.process(b"b", vec![tx(8, "b", "60.00")]).unwrap().is_empty());
        assert_eq!(alerts(&h.process(b"b", vec![tx(6, "b", "60.00")]).unwrap()).len(), 1);
        assert_eq!(h.value::<u64>(b"a", "alerts"), Some(3));
        assert_eq!(
            h.broadcast_value::<String, Versions>("rules", &"big".into()),
            Some(vec![(2000, Some(Cents(50000))), (4000, Some(Cents(30000)))])
        );
    }

    #[test]
    fn bad_rules_are_errors() {
        let mut h = Harness::<FraudRules>::new();
        let missing = h.process_broadcast(vec![rule(r#"{"rule_id":"x"}"#, 0)]).unwrap_err();
        assert!(missing.to_string().contains("has no `max_amount`"), "{missing}");
        assert!(h
            .process_broadcast(vec![rule(r#"{"rule_id":"x","max_amount":"1.234"}"#, 0)])
            .is_err());
        assert!(h.process_broadcast(vec![rule("not json", 0)]).is_err());
    }

    #[test]
    fn the_key_is_the_account() {
        let mut h = Harness::<FraudRules>::new();
        assert_eq!(h.key(&tx(1, "a7", "1.00")).unwrap(), b"a7");
    }
}
