#!/usr/bin/env python3
"""reference.py SCHEDULE_RUNS — checks delayq's cron runs in time zones against instants computed
here independently: Python's own reading of the expressions and its zoneinfo (the same system tz
database, read by other code), with the rules of src/schedule/recurrence.h worked out by search:
a local time that does not exist runs at the first instant whose local time is past it; one that
occurs twice runs at its first occurrence (fold=0), or at both when the minute or hour field
starts with '*'; runs that fall on one instant are one run. 27 zones, 2026 to 2040 (the hourly
expression over 2026), about 30 s of a core. Prints each mismatch and exits 1 on any."""

import datetime
import subprocess
import sys
from zoneinfo import ZoneInfo

ZONES = [
    "America/New_York", "America/Los_Angeles", "America/Chicago", "America/Sao_Paulo",
    "America/Santiago", "America/Havana", "America/St_Johns", "Europe/London", "Europe/Paris",
    "Europe/Dublin", "Europe/Moscow", "Asia/Tehran", "Asia/Kolkata", "Asia/Kathmandu",
    "Asia/Tokyo", "Asia/Gaza", "Australia/Sydney", "Australia/Lord_Howe", "Australia/Adelaide",
    "Pacific/Auckland", "Pacific/Chatham", "Pacific/Apia", "Africa/Casablanca", "Antarctica/Troll",
    "Etc/GMT+5", "Etc/GMT-14", "UTC",
]
# (expression, first year, last year)
EXPRESSIONS = [
    ("30 2 * * *", 2026, 2040),          # daily, inside many zones' spring gap
    ("0 1 * * *", 2026, 2040),           # daily, inside many zones' repeated hour
    ("0 0 * * *", 2026, 2040),           # midnight: the gap of zones that change at 24:00
    ("*/30 0-3 * * SUN", 2026, 2040),    # wildcard minutes on Sundays, when most zones change
    ("15 9 1-7 * MON", 2026, 2040),      # Vixie's either-day rule
    ("0 * * * *", 2026, 2026),           # hourly (wildcard hour) through every change
]
NAMES = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8,
         "sep": 9, "oct": 10, "nov": 11, "dec": 12, "sun": 0, "mon": 1, "tue": 2, "wed": 3,
         "thu": 4, "fri": 5, "sat": 6}


def values(field, low, high):
    out = set()
    for item in field.split(","):
        base, _, step = item.partition("/")
        step = int(step) if step else 1
        if base == "*":
            first, last = low, high
        elif "-" in base:
            a, b = base.split("-")
            first, last = int(NAMES.get(a.lower(), a)), int(NAMES.get(b.lower(), b))
        else:
            first = int(NAMES.get(base.lower(), base))
            last = high if step > 1 else first
        out.update(range(first, last + 1, step))
    return out


def local_times(expression, year_from, year_to):
    minute, hour, dom, month, dow = expression.split()
    minutes, hours = sorted(values(minute, 0, 59)), sorted(values(hour, 0, 23))
    doms, months = values(dom, 1, 31), values(month, 1, 12)
    dows = {d % 7 for d in values(dow, 0, 7)}
    either = not dom.startswith("*") and not dow.startswith("*")
    day = datetime.date(year_from, 1, 1)
    while day.year <= year_to:
        by_dom, by_dow = day.day in doms, (day.weekday() + 1) % 7 in dows
        if day.month in months and ((by_dom or by_dow) if either else (by_dom and by_dow)):
            for h in hours:
                for m in minutes:
                    yield datetime.datetime(day.year, day.month, day.day, h, m)
        day += datetime.timedelta(days=1)


def local_of(seconds, zone):
    return datetime.datetime.fromtimestamp(seconds, zone).replace(tzinfo=None)


def instants(local, zone, both):
    u0 = int(local.replace(tzinfo=zone, fold=0).timestamp())
    u1 = int(local.replace(tzinfo=zone, fold=1).timestamp())
    exists = local_of(u0, zone) == local
    if u0 == u1:
        return [u0]
    if not exists:  # a gap: the first second whose local time is past it
        lo, hi = min(u0, u1), max(u0, u1)
        while lo < hi:
            mid = (lo + hi) // 2
            if local_of(mid, zone) > local:
                hi = mid
            else:
                lo = mid + 1
        return [lo]
    return sorted({u0, u1}) if both else [min(u0, u1)]


def main():
    tool = sys.argv[1]
    failures = 0
    for name in ZONES:
        zone = ZoneInfo(name)
        for expression, year_from, year_to in EXPRESSIONS:
            minute, hour = expression.split()[:2]
            both = minute.startswith("*") or hour.startswith("*")
            start = int(datetime.datetime(year_from, 1, 1, tzinfo=datetime.timezone.utc)
                        .timestamp()) + 2 * 86400
            end = int(datetime.datetime(year_to, 12, 31, tzinfo=datetime.timezone.utc)
                      .timestamp()) - 2 * 86400
            expected = set()
            for local in local_times(expression, year_from, year_to):
                expected.update(u for u in instants(local, zone, both) if start < u <= end)
            expected = sorted(expected)
            out = subprocess.run([tool, name, expression, str(start * 1000), str(end * 1000)],
                                 capture_output=True, text=True, check=True).stdout.split()
            got = [int(ms) // 1000 for ms in out]
            if got != expected:
                failures += 1
                missing = sorted(set(expected) - set(got))[:5]
                extra = sorted(set(got) - set(expected))[:5]
                print(f"{name} '{expression}': {len(got)} runs, expected {len(expected)}; "
                      f"missing {[local_of(u, zone).isoformat() for u in missing]} "
                      f"extra {[local_of(u, zone).isoformat() for u in extra]}")
    checked = len(ZONES) * len(EXPRESSIONS)
    print(f"{checked - failures} of {checked} zone and expression pairs agree")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
