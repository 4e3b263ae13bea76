#!/usr/bin/env bash
# brickroute's lookups side by side with DPDK's, in paired rounds on one CPU.
#
# Each round runs `brickroute fib bench` (IPv4 table and random queries), then the DPDK
# anchor's dpdk_bench for `rte_fib`, then the same for IPv6 and `rte_fib6`, all on the
# same tables and pinned to the same CPU. It prints each round's figures and ratios as
# they come, then the median of each over the rounds and in how many rounds the ratio
# was 2 or more. These machines are shared and noisy, and both sides change speed with
# the host from one minute to the next: only figures taken in the same round compare.
#
#   ./scripts/lpm-vs-dpdk.sh [--rounds N] [--cpu C] [--anchor DIR] [V4_TABLE V6_TABLE]
#   ./scripts/lpm-vs-dpdk.sh --summary CSV     (the medians of a CSV it wrote before)
#
# --anchor: the directory holding dpdk_bench.c (default: ../shared/anchors/lpm beside
# the repository). Without tables, `brickroute fib gen` writes its synthetic ones. It
# installs what building needs and, for the DPDK side, libdpdk-dev, if they are
# missing (scripts/install-deps.sh).
# Builds go to target/: brickroute in release mode, the anchor to target/anchors/.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

rounds=10
cpu=0
anchor="$repo/../shared/anchors/lpm"
tables=()
summary_of=""
die() {
    echo "lpm-vs-dpdk: $*" >&2
    exit 2
}
# The medians of each side and of the ratio, per family and query kind, over the rounds
# of the CSV file $1.
summary() {
    python3 - "$1" <<'PY'
import csv, statistics, sys
def die(msg):
    print("lpm-vs-dpdk: " + msg, file=sys.stderr)
    sys.exit(2)
try:
    rows = list(csv.DictReader(open(sys.argv[1])))
    kinds = [(f, q) for f, q in (("4", "table"), ("4", "random"), ("6", "table"), ("6", "random"))
             if any(r["family"] == f and r["queries"] == q for r in rows)]
    for r in rows:
        float(r["ours"]), float(r["dpdk"]), float(r["ratio"])
except (OSError, KeyError, ValueError, TypeError) as e:
    die("%s is not a CSV of rounds from this script (%s: %s)" % (sys.argv[1], type(e).__name__, e))
if not kinds:
    die("%s holds no rounds" % sys.argv[1])
print("medians over %d rounds (range), Mlookups/s:" % len({r["round"] for r in rows}))
print("%-13s %-22s %-22s %-20s %s" % ("queries", "ours", "DPDK", "ratio", "rounds at 2x or more"))
for fam, q in kinds:
    sel = [r for r in rows if r["family"] == fam and r["queries"] == q]
    col = lambda k: [float(r[k]) for r in sel]
    fmt = lambda xs: "%.1f (%.1f-%.1f)" % (statistics.median(xs), min(xs), max(xs))
    ratios = col("ratio")
    rat = "%.2f (%.2f-%.2f)" % (statistics.median(ratios), min(ratios), max(ratios))
    print("%-13s %-22s %-22s %-20s %d of %d" % ("IPv%s %s" % (fam, q), fmt(col("ours")), fmt(col("dpdk")), rat,
                                             sum(x >= 2 for x in ratios), len(ratios)))
PY
}
while [[ $# -gt 0 ]]; do
    case "$1" in
    --rounds) rounds=${2:-}; shift 2 || die "--rounds needs a number" ;;
    --cpu) cpu=${2:-}; shift 2 || die "--cpu needs a CPU number" ;;
    --anchor) anchor=${2:-}; shift 2 || die "--anchor needs a directory" ;;
    --summary) summary_of=${2:-}; shift 2 || die "--summary needs a CSV file" ;;
    -h | --help)
        sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) tables+=("$1"); shift ;;
    esac
done
if [[ -n "$summary_of" ]]; then
    [[ -r "$summary_of" ]] || die "cannot read '$summary_of'"
    summary "$summary_of"
    exit 0
fi
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a whole number of at least 1, not '$rounds'"
[[ "$cpu" =~ ^[0-9]+$ ]] || die "--cpu must be a CPU number, not '$cpu'"
taskset -c "$cpu" true 2>/dev/null || die "cannot run on CPU $cpu (see nproc)"
[[ ${#tables[@]} -eq 0 || ${#tables[@]} -eq 2 ]] || die "give both tables (IPv4, then IPv6) or neither"
[[ -f "$anchor/dpdk_bench.c" ]] || die "no dpdk_bench.c in '$anchor': pass --anchor with the anchors' lpm directory"
for t in "${tables[@]}"; do
    [[ -r "$t" ]] || die "cannot read table '$t'"
done

# (libdpdk-dev: DPDK 22.11 on Debian 12, for the anchor.)
./scripts/install-deps.sh libdpdk-dev
export PATH="$HOME/.cargo/bin:$PATH"
mkdir -p target/anchors
dpdk=target/anchors/dpdk_bench
if [[ ! -x "$dpdk" || "$anchor/dpdk_bench.c" -nt "$dpdk" || "$anchor/lpmbench.h" -nt "$dpdk" ]]; then
    echo "lpm-vs-dpdk: building $dpdk" >&2
    # shellcheck disable=SC2046 # pkg-config's flags are separate words
    gcc -O3 -march=native "$anchor/dpdk_bench.c" -o "$dpdk" $(pkg-config --cflags --libs libdpdk)
fi

# shellcheck source=scripts/cpu-target.sh
source scripts/cpu-target.sh
cargo build --release -q -p brickroute
br=target/release/brickroute

if [[ ${#tables[@]} -eq 0 ]]; then
    [[ -s target/anchors/gen-v4.txt ]] || "$br" fib gen --family 4 >target/anchors/gen-v4.txt
    [[ -s target/anchors/gen-v6.txt ]] || "$br" fib gen --family 6 >target/anchors/gen-v6.txt
    tables=(target/anchors/gen-v4.txt target/anchors/gen-v6.txt)
fi
v4=${tables[0]}
v6=${tables[1]}

# Mlookups/s of one `fib bench` run: TABLE QUERIES.
ours() {
    taskset -c "$cpu" "$br" fib bench --table "$1" --queries "$2" --json --runs 7 --updates 0 --no-baseline |
        tail -1 | python3 -c 'import json,sys; print("%.1f" % (json.load(sys.stdin)["lookups_per_sec"] / 1e6))'
}
# "uniform X" and "table Y" (Mlookups/s) of one dpdk_bench run of WHICH (fib or fib6).
# DPDK's EAL takes the CPU from -l; it also runs without hugepages here.
theirs() {
    RUNS=7 taskset -c "$cpu" "$dpdk" -l "$cpu" --no-pci --no-telemetry --no-huge --no-shconf -m 1536 \
        --log-level=1 -- "$v4" "$v6" - "$1" 2>&1 |
        awk '/lookup_bulk/ { for (i = 1; i <= NF; i++) if ($i == "Mlookups/s(med)") print $2, $(i + 1) }'
}
pick() { awk -v k="$1" '$1 == k { print $2 }' <<<"$2"; }

csv=target/anchors/lpm-vs-dpdk.csv
echo "round,utc,family,queries,ours,dpdk,ratio" >"$csv"
echo "tables: $v4, $v6; CPU $cpu; $rounds rounds; Mlookups/s, ours against DPDK's in the same round" >&2
for r in $(seq "$rounds"); do
    t=$(date -u +%H:%M:%S)
    o4t=$(ours "$v4" table)
    o4r=$(ours "$v4" random)
    d4=$(theirs fib)
    o6t=$(ours "$v6" table)
    o6r=$(ours "$v6" random)
    d6=$(theirs fib6)
    for row in "4 table $o4t $(pick table "$d4")" "4 random $o4r $(pick uniform "$d4")" \
        "6 table $o6t $(pick table "$d6")" "6 random $o6r $(pick uniform "$d6")"; do
        read -r fam q o d <<<"$row"
        [[ -n "${d:-}" ]] || die "round $r: dpdk_bench printed no IPv$fam $q figure"
        ratio=$(python3 -c "print('%.2f' % ($o / $d))")
        echo "$r,$t,$fam,$q,$o,$d,$ratio" >>"$csv"
        printf 'round %d %s  IPv%s %-6s  ours %7.1f  DPDK %7.1f  ratio %s\n' "$r" "$t" "$fam" "$q" "$o" "$d" "$ratio"
    done
done

echo
summary "$csv"
echo
echo "every round: $csv"
