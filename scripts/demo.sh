#!/usr/bin/env bash
# The router's main job on the built-in default: the shipped sample capture through
# the shipped IPv4 router configuration (conf/router.click), then the router's
# counters. The frames each interface sent are left in demo-out/ (pcap files).
# Installs what it needs first (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -q -p brickroute
mkdir -p demo-out
echo "== brickroute run conf/router.click  (input: conf/samples/router-sample.pcap)"
./target/release/brickroute run conf/router.click \
    OUT1=demo-out/if1.pcap OUT2=demo-out/if2.pcap OUT3=demo-out/if3.pcap \
    -h src.count -h chk.drops -h nonip.count -h tohost.count \
    -h if1/cnt.count -h if2/cnt.count -h if3/cnt.count
echo "== frames sent per interface are in demo-out/ (if1.pcap if2.pcap if3.pcap);"
echo "   open them with any pcap reader (tcpdump -nr, tshark -r, Wireshark)"
