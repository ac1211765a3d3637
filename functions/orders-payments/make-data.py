#!/usr/bin/env python3
"""Writes orders.jsonl and payments.jsonl (fixed seed: the same files every run).

Orders 1-300 from 10:00:00 to about 10:30 (event time), each line at most 4 s
older than the newest before it in its file; payments likewise, from 10:00
to about 10:45. What the payments are (see expected.py for what matches):
  * most orders: one payment 0 s to 9 min after the order;
  * every 9th order: two payments (a deposit and the rest), both in time;
  * every 13th order: one payment more than 10 minutes after (no match);
  * every 17th order: a payment before the order (no match);
  * every 23rd order: no payment at all;
  * orders 295-298: the bounds, payments at +0 s and +10 min (match),
    +10 min 1 s and -1 s (no match);
  * orders 301-303: the order AND its payment (a minute later) are both
    written minutes after newer events of their own file: late, dropped;
  * payment p999 names an order that does not exist.
"""
import json
import random
from datetime import datetime, timedelta, timezone

T0 = datetime(2026, 1, 15, 10, 0, 0, tzinfo=timezone.utc)
rng = random.Random(24)


def stamp(seconds):
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def money(cents):
    return f"{cents // 100}.{cents % 100:02d}"


def jitter(events):
    """Sort by time, then swap neighbours at most 4 s apart (out of order, never late)."""
    events.sort(key=lambda e: e[0])
    for i in range(len(events) - 1):
        if events[i + 1][0] - events[i][0] <= 4 and rng.random() < 0.4:
            events[i], events[i + 1] = events[i + 1], events[i]
    newest = -1
    for t, _ in events:
        assert t >= newest - 4, "jitter made an event late"
        newest = max(newest, t)
    return events


orders, payments = [], []
t = 0
for oid in range(1, 301):
    t += rng.randint(1, 11)
    ot = t if oid < 295 else 60 * (oid - 290)  # 295-298: 5-8 minutes in
    cents = rng.randint(100, 25000)
    order = {"order_id": oid, "customer_id": rng.randint(1, 20), "amount": money(cents),
             "event_time": stamp(ot)}
    orders.append((ot, order))

    def pay(pid, delay, amount=cents):
        payments.append((ot + delay, {"payment_id": pid, "order_id": oid, "amount": money(amount),
                                      "event_time": stamp(ot + delay)}))

    if oid in (295, 296, 297, 298):
        pay(f"p{oid}", {295: 0, 296: 600, 297: 601, 298: -1}[oid])
    elif oid % 23 == 0:
        pass
    elif oid % 17 == 0:
        pay(f"p{oid}", -rng.randint(2, 120))
    elif oid % 13 == 0:
        pay(f"p{oid}", rng.randint(601, 900))
    elif oid % 9 == 0:
        deposit = cents // 5
        pay(f"p{oid}a", rng.randint(0, 60), deposit)
        pay(f"p{oid}b", rng.randint(61, 599), cents - deposit)
    else:
        pay(f"p{oid}", rng.choice([rng.randint(0, 30), rng.randint(5, 180), rng.randint(60, 540)]))
payments.append((900, {"payment_id": "p999", "order_id": 999, "amount": "5.00",
                       "event_time": stamp(900)}))

orders = [o for _, o in jitter(orders)]
payments = [p for _, p in jitter(payments)]


def insert_late(lines, event, newer_than):
    """Put `event` just after the first line newer than `newer_than` seconds."""
    for i, line in enumerate(lines):
        if datetime.strptime(line["event_time"], "%Y-%m-%dT%H:%M:%SZ").replace(
                tzinfo=timezone.utc) > T0 + timedelta(seconds=newer_than):
            lines.insert(i + 1, event)
            return
    raise SystemExit("no line is new enough")


# Late pairs: order at 2, 4, 6 minutes; payment a minute later; both written
# after their file has passed order time + 10 min + 1 min (far beyond 5 s).
for n, oid in enumerate((301, 302, 303)):
    ot = 120 * (n + 1)
    insert_late(orders, {"order_id": oid, "customer_id": 7, "amount": "42.00",
                         "event_time": stamp(ot)}, ot + 660 + 60 * n)
    insert_late(payments, {"payment_id": f"p{oid}", "order_id": oid, "amount": "42.00",
                           "event_time": stamp(ot + 60)}, ot + 660 + 90 * n)


def write(path, lines):
    with open(path, "w") as f:
        for line in lines:
            amount = line.pop("amount")
            text = json.dumps(line, separators=(",", ":"))
            # amounts as JSON numbers with two decimals, placed before event_time
            text = text.replace(',"event_time"', f',"amount":{amount},"event_time"', 1)
            f.write(text + "\n")


write("orders.jsonl", orders)
write("payments.jsonl", payments)
