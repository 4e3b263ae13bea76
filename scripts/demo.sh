#!/usr/bin/env bash
# The router's main job on the built-in default: the shipped sample capture through
# the shipped IPv4 router configuration, then what came out of each interface.
# Installs what it needs first (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -q -p brickroute
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
./target/release/brickroute run conf/router.click \
    OUT1="$out/if1.pcap" OUT2="$out/if2.pcap" OUT3="$out/if3.pcap" \
    -h src.count -h chk.drops -h nonip.count -h tohost.count \
    -h if1/cnt.count -h if2/cnt.count -h if3/cnt.count
echo "Output captures (kept only for this run): $(ls "$out" | tr '\n' ' ')"
