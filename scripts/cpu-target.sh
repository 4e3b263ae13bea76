# Sourced by the scripts that build: the workspace builds for x86-64-v3
# (.cargo/config.toml), and on a CPU without one of that level's features the binaries
# would not run. There, build for any x86-64 instead (the lookups then pick their fast
# paths at run time). The flags are those of the table in crates/brickroute/src/cpu.rs,
# which makes the same check inside the binary; keep the two lists alike.
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
missing=""
for f in pni ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt avx f16c bmi1 avx2 bmi2 abm; do
    [[ "$cpu_flags" == *" $f "* ]] || missing="$missing $f"
done
if [[ -n "$missing" && -z "${RUSTFLAGS:-}" ]]; then
    echo "note: this CPU lacks x86-64-v3's$missing; building for any x86-64" >&2
    export RUSTFLAGS="-C target-cpu=x86-64"
fi
unset cpu_flags missing f
