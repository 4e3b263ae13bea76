#!/usr/bin/env bash
# The whole test suite: formatting, lints, then every test of the workspace.
# Installs what it needs first (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
source ./scripts/cpu-target.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace
echo "== fuzz targets compile (scripts/fuzz.sh runs them)"
cargo check --manifest-path fuzz/Cargo.toml --bins
