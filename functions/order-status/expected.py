#!/usr/bin/env python3
"""Computes expected.jsonl, the output of pipeline.yaml, without Weir's code.

What the pipeline means:
  * clean-payments (transform): a payment line with "kind":"refund" or an
    amount <= 0 is dropped; every other becomes {"order_id","paid","at"}
    (paid: the amount, at: the payment's event time).
  * status (co-process, keyed by order id): an order's FIRST clean payment
    (in the payments file's order: one source reads it in order, and one
    key's events reach its subtask in order) decides it:
      - paid at most 10 minutes after the order (or any time before it):
        {"order_id":N,"status":"paid","amount":A};
      - paid later than that: {"order_id":N,"status":"unpaid"} and
        {"order_id":N,"status":"late-payment","amount":A};
      - no clean payment at all: {"order_id":N,"status":"unpaid"}.
    Later payments of an order, and payments of orders that never come
    (p999), give nothing. Amounts have two decimals.

That is the declarative answer, computed first. The function gets there
with keyed state and event-time timers (Flink's KeyedCoProcessFunction
pattern): an order waits for its payment until a timer at order time +
10 min (then "unpaid", remembered until order time + 1 h for a late
payment); a payment waits for its order until payment time + 10 min. To
show the data do not let the result depend on how the two sources
interleave or how often watermarks come, this script also replays that
state machine on many interleavings: each source's watermark is the
newest time it has read - 5 s - 1 ms, the stage's is the minimum of the
two (a finished source holds nothing back), timers fire when it reaches
them (every pending timer at the end), and watermarks are skipped at
random (batches). Every replay must give the declarative answer.

Output order across keys depends on parallelism, so lines are sorted by
order id, then status in the order paid, unpaid, late-payment; the
integration test sorts the output the same way.

Run from this directory: python3 expected.py
"""
import json
import random
from datetime import datetime, timezone
from decimal import Decimal

PAY_WITHIN, REMEMBER_UNPAID, KEEP_PAYMENT, OUT_OF_ORDER = 600_000, 3_600_000, 600_000, 5_000
INF = float("inf")
RANK = {"paid": 0, "unpaid": 1, "late-payment": 2}


def millis(text):
    return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S%z").timestamp() * 1000)


def read(path):
    with open(path) as f:
        return [json.loads(line, parse_float=Decimal) for line in f if line.strip()]


def clean(payment):
    """The transform: None (dropped) or (order_id, paid, at)."""
    if payment.get("kind") == "refund" or payment["amount"] <= 0:
        return None
    return (payment["order_id"], payment["amount"], millis(payment["event_time"]))


def line(order_id, status, amount=None):
    if amount is None:
        return '{"order_id":%d,"status":"%s"}' % (order_id, status)
    return '{"order_id":%d,"status":"%s","amount":%s}' % (order_id, status, f"{amount:.2f}")


orders = read("orders.jsonl")
payments = read("payments.jsonl")
cleaned = [c for c in map(clean, payments) if c]
order_time = {o["order_id"]: millis(o["event_time"]) for o in orders}
assert len(order_time) == len(orders), "an order id appears twice"

# The declarative answer.
expected = []
for order_id, t in order_time.items():
    first = next((c for c in cleaned if c[0] == order_id), None)
    if first is None:
        expected.append(line(order_id, "unpaid"))
    elif first[2] <= t + PAY_WITHIN:
        expected.append(line(order_id, "paid", first[1]))
    else:
        expected.append(line(order_id, "unpaid"))
        expected.append(line(order_id, "late-payment", first[1]))
    # The cases the function's retention cannot decide (kept out of the data).
    for _, _, at in (c for c in cleaned if c[0] == order_id):
        assert at > t - KEEP_PAYMENT, f"order {order_id}: a payment waits at most 10 min"
        assert at < t + REMEMBER_UNPAID, f"order {order_id}: unpaid is remembered for 1 h"
expected.sort(key=lambda text: (json.loads(text)["order_id"], RANK[json.loads(text)["status"]]))


def items(source, events, time_of):
    """A source's stream: each event, then the watermark it makes; finally the end."""
    newest = -INF
    for event in events:
        yield ("event", source, event)
        newest = max(newest, time_of(event))
        yield ("watermark", source, newest - OUT_OF_ORDER - 1)
    yield ("watermark", source, INF)


def replay(stream):
    """The status stage as a state machine: (state, timer) per key."""
    state = {}  # order id -> ("order", t) | ("payment", paid, at) | ("unpaid", t)
    timers = {}  # order id -> the one pending timer (state and timer go together)
    wm = {"orders": -INF, "payments": -INF}
    out = []

    def settle(key, t, paid, at):
        if at <= t + PAY_WITHIN:
            out.append(line(key, "paid", paid))
        else:
            out.extend([line(key, "unpaid"), line(key, "late-payment", paid)])
        state.pop(key)
        timers.pop(key)

    for kind, source, item in stream:
        if kind == "watermark":
            wm[source] = max(wm[source], item)
            w = min(wm.values())
            while True:
                due = sorted((ts, k) for k, ts in timers.items() if ts <= w)
                if not due:
                    break
                for ts, key in due:
                    s = state[key]
                    if s[0] == "order":
                        out.append(line(key, "unpaid"))
                        state[key], timers[key] = ("unpaid", s[1]), s[1] + REMEMBER_UNPAID
                    else:  # an unpaid order or a lone payment forgotten
                        state.pop(key)
                        timers.pop(key)
            continue
        if source == "orders":
            key, t = item["order_id"], millis(item["event_time"])
            s = state.get(key)
            if s is None:
                state[key], timers[key] = ("order", t), t + PAY_WITHIN
            elif s[0] == "payment":
                settle(key, t, s[1], s[2])
            else:
                raise AssertionError(f"order {key} twice")
        else:
            c = clean(item)
            if c is None:
                continue
            key, paid, at = c
            s = state.get(key)
            if s is None:
                state[key], timers[key] = ("payment", paid, at), at + KEEP_PAYMENT
            elif s[0] == "order":
                settle(key, s[1], paid, at)
            elif s[0] == "unpaid":
                out.append(line(key, "late-payment", paid))
                state.pop(key)
                timers.pop(key)
            # else: a payment is already waiting; the first one wins
    assert not state, "state left at the end"
    return sorted(out, key=lambda text: (json.loads(text)["order_id"],
                                         RANK[json.loads(text)["status"]]))


def interleave(a, b, how, rng, skip):
    a, b = list(a), list(b)
    out = []
    while a or b:
        if how == "orders-first":
            take_a = bool(a)
        elif how == "payments-first":
            take_a = not b
        elif how == "alternate":
            take_a = bool(a) and (not b or len(out) % 2 == 0)
        else:
            take_a = bool(a) and (not b or rng.random() < how)
        item = a.pop(0) if take_a else b.pop(0)
        # Skip some watermarks (not a source's last): batches of several events.
        if item[0] == "watermark" and item[2] != INF and rng.random() < skip:
            continue
        out.append(item)
    return out


rng = random.Random(24)
order_items = list(items("orders", orders, lambda o: millis(o["event_time"])))
payment_items = list(items("payments", payments, lambda p: millis(p["event_time"])))
runs = 0
for how in ["orders-first", "payments-first", "alternate"] + [0.1, 0.3, 0.5, 0.7, 0.9] * 40:
    for skip in (0.0, 0.8):
        got = replay(interleave(order_items, payment_items, how, rng, skip))
        assert got == expected, f"interleaving {how} (skip {skip}) gives another result"
        runs += 1

with open("expected.jsonl", "w") as f:
    f.writelines(text + "\n" for text in expected)
counts = {s: sum(json.loads(t)["status"] == s for t in expected) for s in RANK}
print(f"{len(expected)} lines {counts}; the same in {runs} replays")
