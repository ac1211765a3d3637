#!/usr/bin/env python3
"""Writes orders-with-region.jsonl (fixed seed: the same file every run).

300 orders of 16 customers in 4 regions (customer c is in
REGIONS[(c - 1) % 4]: eu 1 5 9 13, us 2 6 10 14, apac 3 7 11 15,
latam 4 8 12 16), one every 1-2 s from 10:00:00 to about 10:07, in
event-time order (nothing is late). Scripted on top of the random orders:
  * in minute 10:00 latam's only orders are one of 25.00 by each of
    customers 4, 8, 12 and 16: a four-way tie for three places (4, 8, 12 win);
  * in the last minute only customers 3 and 7 of apac order: a top of two.
"""
import json
import random
from datetime import datetime, timedelta, timezone

REGIONS = ["eu", "us", "apac", "latam"]
T0 = datetime(2026, 1, 15, 10, 0, 0, tzinfo=timezone.utc)
rng = random.Random(2024)


def region(customer):
    return REGIONS[(customer - 1) % 4]


orders, t = [], 0
while len(orders) < 300:
    t += rng.randint(1, 2)
    customer = rng.randint(1, 16)
    if t < 60 and region(customer) == "latam":
        continue  # minute 10:00 of latam is scripted below
    orders.append((t, customer, rng.randint(100, 20000)))
last_minute = orders[-1][0] // 60
orders = [o for o in orders
          if not (o[0] // 60 == last_minute and region(o[1]) == "apac" and o[1] not in (3, 7))]
for i, customer in enumerate((16, 4, 12, 8)):
    orders.append((10 + 10 * i, customer, 2500))
orders.sort(key=lambda o: o[0])

with open("orders-with-region.jsonl", "w") as f:
    for order_id, (t, customer, cents) in enumerate(orders, start=1):
        stamp = (T0 + timedelta(seconds=t)).strftime("%Y-%m-%dT%H:%M:%SZ")
        f.write(f'{{"order_id":{order_id},"customer_id":{customer},"region":"{region(customer)}",'
                f'"amount":{cents // 100}.{cents % 100:02d},"event_time":"{stamp}"}}\n')
