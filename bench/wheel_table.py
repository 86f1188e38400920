#!/usr/bin/env python3
"""Turns wheel_bench's JSON output into the Markdown tables of docs/BENCHMARKS.md.

Usage: wheel_table.py RESULTS.json
RESULTS.json comes from `wheel_bench --benchmark_repetitions=N --benchmark_out=RESULTS.json`;
with repetitions the medians are used, otherwise the single runs.
"""
import json
import re
import sys

NAME = re.compile(r"^(BM_\w+)/wheel:([^/]+)/pending:(\d+)/")
WHEELS = ["hierarchical", "heap", "hashed:3600x1s", "hashed:3600x1ms"]
SIZES = ["10000", "1000000", "10000000"]
SIZE_LABEL = {"10000": "10^4", "1000000": "10^6", "10000000": "10^7"}
TABLES = [
    ("BM_Schedule", "per_op", "schedule, ns per timer (filling an empty queue to n)"),
    ("BM_Cancel", "per_op", "cancel at n pending, ns per cancel (a tenth of them, random order)"),
    ("BM_CancelAll", "per_op", "cancel all n, ns per cancel (random order, down to empty)"),
    ("BM_Expire", "per_op", "expiry, ns per fired timer (advance through the window)"),
    ("BM_Expire", "per_tick", "expiry, ns per tick advanced"),
    ("BM_TtrMix", "per_op", "TTR-like mix, ns per timer (schedule all, cancel 95%, fire the rest)"),
    ("BM_Schedule", "bytes_per_timer", "bytes per pending timer (queue memory + caller's Timer)"),
]


def load(path):
    with open(path) as f:
        runs = json.load(f)["benchmarks"]
    medians = any(r.get("aggregate_name") == "median" for r in runs)
    values = {}
    for run in runs:
        if medians and run.get("aggregate_name") != "median":
            continue
        match = NAME.match(run["name"])
        if match:
            values[match.groups()] = run
    return values


def fmt(value):
    if value >= 1000:
        return f"{value:,.0f}"
    if value < 1:
        return f"{value:.2f}"
    return f"{value:.1f}"


def main():
    values = load(sys.argv[1])
    for bench, counter, title in TABLES:
        print(f"**{title}**\n")
        print("| queue | " + " | ".join(SIZE_LABEL[s] for s in SIZES) + " |")
        print("|---|" + "---:|" * len(SIZES))
        for wheel in WHEELS:
            cells = []
            for size in SIZES:
                run = values.get((bench, wheel, size))
                cells.append(fmt(run[counter]) if run and counter in run else "n/a")
            print(f"| {wheel} | " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    main()
