#!/usr/bin/env python3
"""Checks `brickroute fib lookup` against an independent longest-prefix-match reference.

usage: scripts/fib-check.py [--brickroute PATH] [--queries FILE] [--count N] [--seed S] TABLE

TABLE is a route file as `fib lookup` reads it (`PREFIX/LEN NEXTHOP` per line, IPv4
and IPv6 mixed, `#` comments). The reference reads it on its own: a prefix with host
bits set counts as its network, and of two lines for one prefix the later wins, as the
route-file loader documents. It answers each query from one dictionary per prefix
length, longest length first.

Without --queries it draws --count addresses (default 200,000) from the table itself,
for each family in the table: a quarter uniform at random (IPv6: in 2000::/3), half a
random host inside a random prefix, and a quarter just outside a random prefix (the
address before its first or after its last). With --queries it reads one address per
line from FILE.

It runs `brickroute fib lookup --table TABLE` on the queries and compares every
answer. It prints the number of queries and of mismatches and the first ten
mismatches, and exits 0 when all match, 1 when any differ, and 2 on a bad argument
or when the table or the run fails.
"""

import argparse
import ipaddress
import os
import random
import subprocess
import sys
import tempfile


def die(msg):
    print("fib-check: " + msg, file=sys.stderr)
    sys.exit(2)


def load_table(path):
    """(family width -> {length -> {network int -> next hop}}) from a route file."""
    tables = {32: {}, 128: {}}
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        die(f"cannot read {path}: {e.strerror}")
    with f:
        for n, line in enumerate(f, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            parts = text.split()
            try:
                if len(parts) != 2:
                    raise ValueError("not PREFIX/LEN NEXTHOP")
                net = ipaddress.ip_network(parts[0], strict=False)
                nh = int(parts[1])
            except ValueError as e:
                die(f"{path}:{n}: {e}")
            width = net.max_prefixlen
            tables[width].setdefault(net.prefixlen, {})[int(net.network_address)] = nh
    return tables


def by_length(tables):
    """Per family width, (mask, routes) for each prefix length in the table, longest
    first."""
    out = {}
    for width, t in tables.items():
        out[width] = [((((1 << n) - 1) << (width - n)) if n else 0, t[n]) for n in sorted(t, reverse=True)]
    return out


def reference(levels, addr):
    """The next hop of the longest prefix covering `addr`, or None."""
    value = int(addr)
    for mask, routes in levels[addr.max_prefixlen]:
        nh = routes.get(value & mask)
        if nh is not None:
            return nh
    return None


def parse_answer(line):
    """(address, next hop or None) from a line of `fib lookup`, or None if the line is
    not one."""
    parts = line.split()
    if len(parts) != 2 or not (parts[1] == "-" or parts[1].isdigit()):
        return None
    try:
        addr = ipaddress.ip_address(parts[0])
    except ValueError:
        return None
    return addr, None if parts[1] == "-" else int(parts[1])


def draw_queries(tables, count, seed):
    rng = random.Random(seed)
    prefixes = {w: [(net, length) for length, nets in t.items() for net in nets] for w, t in tables.items()}
    widths = [w for w in (32, 128) if prefixes[w]]
    if not widths:
        die("the table holds no routes")
    out = []
    for i in range(count):
        width = widths[i % len(widths)]
        kind = rng.random()
        if kind < 0.25:
            if width == 32:
                v = rng.getrandbits(32)
            else:
                v = (0b001 << 125) | rng.getrandbits(125)
        else:
            net, length = rng.choice(prefixes[width])
            host = rng.getrandbits(width - length) if length < width else 0
            if kind < 0.75:
                v = net | host
            elif rng.random() < 0.5:
                v = (net - 1) % (1 << width)
            else:
                v = (net + (1 << (width - length))) % (1 << width)
        out.append(ipaddress.IPv4Address(v) if width == 32 else ipaddress.IPv6Address(v))
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description="Checks brickroute fib lookup against an independent reference.")
    ap.add_argument("table")
    ap.add_argument("--brickroute", default=os.path.join(here, "..", "target", "release", "brickroute"))
    ap.add_argument("--queries")
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.count < 1:
        die("--count must be at least 1")
    if not os.access(a.brickroute, os.X_OK):
        die(f"{a.brickroute} is not an executable (build it with cargo build --release, or give --brickroute)")
    tables = load_table(a.table)
    if a.queries:
        try:
            with open(a.queries, encoding="utf-8") as f:
                lines = [l.strip() for l in f if l.strip() and not l.startswith("#")]
            queries = [ipaddress.ip_address(l) for l in lines]
        except (OSError, ValueError) as e:
            die(f"{a.queries}: {e}")
    else:
        queries = draw_queries(tables, a.count, a.seed)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as q:
        q.write("".join(f"{x}\n" for x in queries))
        q.seek(0)
        run = subprocess.run([a.brickroute, "fib", "lookup", "--table", a.table],
                             stdin=q, capture_output=True, text=True)
    if run.returncode != 0:
        die(f"fib lookup exited with {run.returncode}: {run.stderr.strip()}")
    answers = run.stdout.splitlines()
    if len(answers) != len(queries):
        die(f"fib lookup printed {len(answers)} lines for {len(queries)} queries")
    levels = by_length(tables)
    bad = []
    for x, line in zip(queries, answers):
        want = reference(levels, x)
        if parse_answer(line) != (x, want):
            bad.append((x, line, want))
    print(f"fib-check: {len(queries)} queries, {len(bad)} mismatch{'' if len(bad) == 1 else 'es'}")
    for x, line, want in bad[:10]:
        print(f"  {x}: brickroute printed {line!r}, the reference says {'-' if want is None else want}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
