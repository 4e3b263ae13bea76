#!/usr/bin/env bash
# Installs what building and testing brickroute needs on Debian 12, and any further
# Debian packages named as arguments (scripts/lpm-vs-dpdk.sh asks for libdpdk-dev).
# Idempotent: safe to run any number of times; installs only what is missing.
# bird2 and frr are for the tests in which BIRD and FRR drive the router
# (crates/brickroute/tests/routing_daemons.rs); they start their own daemons in
# namespaces. (Where systemd runs, Debian also starts bird.service and frr.service with
# their default configurations, which install no routes.) iputils-ping is for the test
# that pings through conf/iprouter.click (crates/brickroute/tests/iprouter_conf.rs).
# ethtool turns the NAT test's hosts' transmit checksum offload off
# (crates/brickroute/tests/nat_conf.rs).
set -euo pipefail

need_apt=()
for pkg in build-essential pkg-config python3 iproute2 iputils-ping ethtool bird2 frr "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "install-deps: installing ${need_apt[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        echo "install-deps: installing the Rust toolchain with rustup"
        curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt,clippy
        export PATH="$HOME/.cargo/bin:$PATH"
    fi
fi
for comp in rustfmt clippy; do
    if ! cargo "${comp/rustfmt/fmt}" --version >/dev/null 2>&1; then
        rustup component add "$comp"
    fi
done
