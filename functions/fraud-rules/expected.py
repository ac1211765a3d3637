#!/usr/bin/env python3
"""Compute expected-alerts.jsonl from rules.jsonl and transactions.jsonl,
independently of the Rust function.

Both files are replayed in event-time order (`time`); a rule change applies
to every transaction after it. On equal times a rule change comes first (the
data never has such ties: each rule change is at least a minute of event
time away from every transaction, so the result does not depend on how the
runtime interleaves the broadcast input with the keyed one). A transaction
breaks a rule when its amount is above the rule's max_amount; each
(transaction, rule broken) is one alert, rules in rule_id order, with the
account's running number of alerts. Alerts are written in the order of the
transactions' event times.

Run from this directory: python3 expected.py
"""

import json
from decimal import Decimal


def read(path):
    with open(path) as f:
        return [json.loads(line, parse_float=Decimal) for line in f if line.strip()]


def main():
    rules = read("rules.jsonl")
    transactions = read("transactions.jsonl")
    # (time, 0 = rule change / 1 = transaction, position in its file, record)
    timeline = sorted(
        [(r["time"], 0, i, r) for i, r in enumerate(rules)]
        + [(t["time"], 1, i, t) for i, t in enumerate(transactions)]
    )
    in_force = {}
    alerts_per_account = {}
    out = []
    for _, kind, _, record in timeline:
        if kind == 0:
            if record.get("delete"):
                in_force.pop(record["rule_id"], None)
            else:
                in_force[record["rule_id"]] = Decimal(record["max_amount"])
            continue
        amount = Decimal(record["amount"])
        for rule_id in sorted(in_force):
            if amount > in_force[rule_id]:
                account = record["account_id"]
                alerts_per_account[account] = alerts_per_account.get(account, 0) + 1
                out.append(
                    '{"account_id":%s,"transaction_id":%d,"rule_id":%s,"amount":%s,"account_alerts":%d}'
                    % (
                        json.dumps(account),
                        record["transaction_id"],
                        json.dumps(rule_id),
                        f"{amount:.2f}",
                        alerts_per_account[account],
                    )
                )
    with open("expected-alerts.jsonl", "w") as f:
        f.write("".join(line + "\n" for line in out))


if __name__ == "__main__":
    main()
