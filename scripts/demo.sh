#!/usr/bin/env bash
# brickroute's demo: builds the router, then `brickroute demo` as root — a namespace
# testbed (gen -- dut -- sink), the router on conf/testbed-router.click in dut, a
# generator and a sink for about 10 seconds, a live view, a summary, and nothing left
# behind. Options after the script's name go to `brickroute demo` (--seconds, --rate,
# --size, --threads, --flows, --method).
#
#   scripts/demo.sh --capture   instead runs the shipped sample capture through
#                               conf/router.click and prints the router's counters
#                               (no root needed; the frames each interface sent are
#                               left in demo-out/ as pcap files).
#
# Installs what it needs first (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
source ./scripts/cpu-target.sh
cargo build --release -q -p brickroute

if [ "${1:-}" = "--capture" ]; then
    mkdir -p demo-out
    echo "== brickroute run conf/router.click  (input: conf/samples/router-sample.pcap)"
    ./target/release/brickroute run conf/router.click \
        OUT1=demo-out/if1.pcap OUT2=demo-out/if2.pcap OUT3=demo-out/if3.pcap \
        -h src.count -h chk.drops -h nonip.count -h tohost.count \
        -h if1/cnt.count -h if2/cnt.count -h if3/cnt.count
    echo "== frames sent per interface are in demo-out/ (if1.pcap if2.pcap if3.pcap);"
    echo "   open them with any pcap reader (tcpdump -nr, tshark -r, Wireshark)"
    exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
exec $SUDO ./target/release/brickroute demo "$@"
