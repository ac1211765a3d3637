#!/usr/bin/env python3
"""Computes expected.jsonl, the output of pipeline.yaml, without Weir's code.

The join: an order (left) and a payment (right) with the same order_id
match when order time <= payment time <= order time + 10 min (both bounds
inclusive). Each match is one line {"left":<order line>,"right":<payment
line>}, the two input lines embedded verbatim.

Lateness, as the host defines it: each file is read by its own source
with its own watermark, newest timestamp read - 5 s - 1 ms, sent after
every event (batch_size: 1); a finished source stops holding event time
back. The join's watermark W is the minimum of the two. An order at t
arriving when t + 10 min < W is dropped, a payment at t when t < W; the
join forgets orders once t + 10 min < W and payments once t < W.

How the two sources interleave is not fixed, so this script replays the
join on many interleavings (each file first, alternating, random) under
that rule and also under Flink's stricter rule (drop either side when
t < W), and checks that every replay gives the same matches: the data
are built so that the result does not depend on interleaving (see
make-data.py). Orders 301-303 and their payments are late in their own
files by minutes: whichever of a pair arrives second is dropped in every
interleaving, so they never match (without lateness they would).

Output order across keys depends on parallelism, so the lines are sorted
by (order_id, payment_id); the integration test sorts the output the same
way before comparing line by line.
"""
import json
import random
from datetime import datetime

LOWER, UPPER, OUT_OF_ORDER = 0, 600_000, 5_000
INF = float("inf")


def millis(text):
    return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S%z").timestamp() * 1000)


def read(path):
    with open(path) as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    return [(millis(json.loads(line)["event_time"]), json.loads(line), line) for line in lines]


def items(source, events):
    """A source's stream: each event, then the watermark it makes; finally the end."""
    newest = -INF
    for t, value, line in events:
        yield ("event", source, t, value, line)
        newest = max(newest, t)
        yield ("watermark", source, newest - OUT_OF_ORDER - 1)
    yield ("watermark", source, INF)


def join(stream, flink_rule):
    wm = {"L": -INF, "R": -INF}
    state = {"L": [], "R": []}  # (t, order_id, line)
    matches, dropped = set(), set()
    for item in stream:
        if item[0] == "watermark":
            wm[item[1]] = item[2]
            w = min(wm.values())
            state["L"] = [e for e in state["L"] if e[0] + UPPER >= w]
            state["R"] = [e for e in state["R"] if e[0] - LOWER >= w]
            continue
        _, side, t, value, line = item
        w = min(wm.values())
        late = t < w if flink_rule else (t + UPPER < w if side == "L" else t - LOWER < w)
        if late:
            dropped.add(line)
            continue
        key = value["order_id"]
        other = "R" if side == "L" else "L"
        for (u, k, other_line) in state[other]:
            if k != key:
                continue
            left, right = (t, u) if side == "L" else (u, t)
            lines = (line, other_line) if side == "L" else (other_line, line)
            if left + LOWER <= right <= left + UPPER:
                matches.add(lines)
        state[side].append((t, key, line))
    return matches, dropped


def interleave(a, b, how, rng):
    a, b = list(a), list(b)
    out = []
    while a or b:
        if how == "left-first":
            take_a = bool(a)
        elif how == "right-first":
            take_a = not b
        elif how == "alternate":
            take_a = bool(a) and (not b or len(out) % 2 == 0)
        else:
            take_a = bool(a) and (not b or rng.random() < how)
        out.append(a.pop(0) if take_a else b.pop(0))
    return out


orders, payments = read("orders.jsonl"), read("payments.jsonl")
rng = random.Random(7)
results, dropped_ever = set(), set()
for how in ["left-first", "right-first", "alternate"] + [0.2, 0.5, 0.8] * 100:
    stream = interleave(items("L", orders), items("R", payments), how, rng)
    for flink_rule in (False, True):
        matches, dropped = join(stream, flink_rule)
        results.add(frozenset(matches))
        dropped_ever |= dropped
assert len(results) == 1, "the result depends on how the sources interleave"
matches = next(iter(results))

# Every event dropped in some replay is one of the late pairs.
late_ids = sorted({json.loads(line)["order_id"] for line in dropped_ever})
assert late_ids == [301, 302, 303], late_ids


def sort_key(pair):
    left, right = json.loads(pair[0]), json.loads(pair[1])
    return (left["order_id"], right["payment_id"])


with open("expected.jsonl", "w") as f:
    for left, right in sorted(matches, key=sort_key):
        f.write('{"left":%s,"right":%s}\n' % (left, right))
print(f"{len(matches)} matches; late (never matched): orders and payments of {late_ids}")
