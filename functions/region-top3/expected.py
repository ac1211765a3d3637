#!/usr/bin/env python3
"""Computes expected.jsonl, the output of pipeline.yaml, without Weir's code.

Stage one: each customer's running revenue after each of its orders, in
the file's order (the file is in event-time order). Stage two: per region
and 1-minute tumbling window of the order's event time, each customer's
highest running revenue in the window; the window's result lists the
three highest, ties broken by the lower customer id. Money is counted in
integer cents and written with two decimals. Nothing is late (the input
is in order), so every window fires once.

Results of different regions and windows come out in an order that
depends on parallelism, so the lines are sorted by (window_start,
region); the integration test sorts the output the same way before
comparing line by line.
"""
import json
from collections import defaultdict
from datetime import datetime

MINUTE = 60_000


def cents(text):
    whole, _, fraction = text.partition(".")
    return int(whole) * 100 + int((fraction + "00")[:2])


def money(c):
    return f"{c // 100}.{c % 100:02d}"


totals = defaultdict(int)
best = defaultdict(dict)  # (window_start, region) -> customer -> cents
with open("orders-with-region.jsonl") as f:
    for line in f:
        if not line.strip():
            continue
        order = json.loads(line)
        # the amount's text as written, not through floating point
        amount = line.split('"amount":')[1].split(",")[0]
        customer = order["customer_id"]
        totals[customer] += cents(amount)
        t = int(datetime.strptime(order["event_time"], "%Y-%m-%dT%H:%M:%S%z").timestamp() * 1000)
        window = (t // MINUTE * MINUTE, order["region"])
        best[window][customer] = max(best[window].get(customer, 0), totals[customer])

with open("expected.jsonl", "w") as f:
    for (start, region), customers in sorted(best.items()):
        top = sorted(customers.items(), key=lambda c: (-c[1], c[0]))[:3]
        entries = ",".join(f'{{"customer_id":{c},"revenue":{money(r)}}}' for c, r in top)
        f.write(f'{{"region":"{region}","window_start":{start},"window_end":{start + MINUTE},'
                f'"top":[{entries}]}}\n')
print(f"{len(best)} windows")
