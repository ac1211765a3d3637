#!/usr/bin/env python3
"""Writes orders.jsonl and payments.jsonl (fixed seed: the same files every run).

Orders 1-150 from 10:00 on, 1-25 s apart (about 35 minutes of event time);
payments from about 09:59 to 10:55. Each file is in event-time order but for
neighbours at most 4 s apart swapped (out of order within the 5 s bound,
never late). What each order gets (see expected.py for the statuses):
  * most orders: one payment 0 s to 9.5 min after the order (paid);
  * every 7th: one payment 5-90 s BEFORE the order (paid once the order comes);
  * every 9th: a deposit (0-60 s after) and the rest (61-560 s after): the
    deposit is the first payment and wins;
  * every 11th: no payment at all (unpaid), and for some a refund or a
    zero-amount line within the 10 minutes, which the transform drops;
  * every 13th: one payment 10 min 20 s to 25 min after (unpaid, then
    late-payment);
  * every 6th of the rest: a zero-amount card check 1-20 s after the
    order, before the real payment (30 s or more after): dropped, so the
    real payment is the first;
  * every 5th paid order: a refund (negative amount, "kind":"refund") some
    minutes after its payment: dropped;
  * payment p999 names an order that does not exist (kept, then forgotten).
Every payment is at least 20 s away from its order's 10-minute deadline.
"""
import json
import random
from datetime import datetime, timedelta, timezone

T0 = datetime(2026, 1, 15, 10, 0, 0, tzinfo=timezone.utc)
rng = random.Random(2024)


def stamp(seconds):
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def money(cents):
    sign = "-" if cents < 0 else ""
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"


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
for oid in range(1, 151):
    t += rng.randint(1, 25)
    cents = rng.randint(100, 25000)
    orders.append((t, {"order_id": oid, "customer_id": rng.randint(1, 20),
                       "amount": money(cents), "event_time": stamp(t)}))

    def pay(pid, delay, amount=cents, kind=None):
        line = {"payment_id": pid, "order_id": oid, "amount": money(amount)}
        if kind:
            line["kind"] = kind
        line["event_time"] = stamp(t + delay)
        payments.append((t + delay, line))
        return delay

    if oid % 11 == 0:
        if oid % 2 == 0:
            pay(f"r{oid}", rng.randint(30, 500), -cents, "refund")
        else:
            pay(f"z{oid}", rng.randint(1, 500), 0)
        continue
    if oid % 13 == 0:
        delay = pay(f"p{oid}", rng.randint(620, 1500))
    elif oid % 7 == 0:
        delay = pay(f"p{oid}", -rng.randint(5, 90))
    elif oid % 9 == 0:
        deposit = cents // 5
        pay(f"p{oid}a", rng.randint(0, 60), deposit)
        delay = pay(f"p{oid}b", rng.randint(61, 560), cents - deposit)
    elif oid % 6 == 0:
        pay(f"z{oid}", rng.randint(1, 20), 0)
        delay = pay(f"p{oid}", rng.randint(30, 570))
    else:
        delay = pay(f"p{oid}", rng.choice([rng.randint(0, 30), rng.randint(5, 570)]))
    if oid % 5 == 0:
        pay(f"r{oid}", delay + rng.randint(60, 600), -cents, "refund")
payments.append((900, {"payment_id": "p999", "order_id": 999, "amount": "5.00",
                       "event_time": stamp(900)}))

for _, p in payments:
    if p["order_id"] != 999 and p.get("kind") != "refund" and p["amount"] != "0.00":
        order_time = next(t for t, o in orders if o["order_id"] == p["order_id"])
        delay = (datetime.strptime(p["event_time"], "%Y-%m-%dT%H:%M:%SZ")
                 .replace(tzinfo=timezone.utc) - T0).total_seconds() - order_time
        assert abs(delay - 600) >= 20, p

orders = [o for _, o in jitter(orders)]
payments = [p for _, p in jitter(payments)]


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
print(f"{len(orders)} orders, {len(payments)} payments")
