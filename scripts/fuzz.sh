#!/usr/bin/env bash
# Runs the fuzz targets in fuzz/ with cargo-fuzz (libFuzzer), each for SECONDS (default
# 120), two at a time. Installs what it needs (the nightly toolchain, cargo-fuzz) if it
# is missing. Usage:
#
#   ./scripts/fuzz.sh [SECONDS] [TARGET ...]     (all targets when none is named)
#
# A crash stops that target; its input is saved under fuzz/artifacts/TARGET/ and the
# script exits non-zero after the others finish. Corpora grow in fuzz/corpus/TARGET/.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"

seconds=${1:-120}
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
    echo "fuzz: SECONDS must be a whole number, not '$seconds'" >&2
    exit 2
fi
shift || true
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: installing the nightly toolchain (libFuzzer needs its sanitizer flags)"
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install --locked cargo-fuzz
fi

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi
cargo +nightly fuzz build -O

logs=$(mktemp -d)
failed=()
run() {
    local t=$1
    if cargo +nightly fuzz run -O "$t" -- -max_total_time="$seconds" -rss_limit_mb=4096 >"$logs/$t.log" 2>&1; then
        echo "fuzz: $t: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$logs/$t.log" | tail -n 1), no crash"
    else
        echo "fuzz: $t FAILED (log: $logs/$t.log; input under fuzz/artifacts/$t/)"
        return 1
    fi
}
i=0
while [ $i -lt ${#targets[@]} ]; do
    pids=()
    names=()
    for t in "${targets[@]:$i:2}"; do
        run "$t" &
        pids+=($!)
        names+=("$t")
    done
    for k in "${!pids[@]}"; do
        wait "${pids[$k]}" || failed+=("${names[$k]}")
    done
    i=$((i + 2))
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: crashes in ${failed[*]}" >&2
    exit 1
fi
