#!/usr/bin/env bash
# Run the whole benchmark suite of docs/benchmarks.md and print its tables:
# the criterion benches (suite: ~3 min, scaling: ~1 min), the Lua
# comparison (the seven suite/lua/*.lua under lua5.4 and luajit -joff, each
# interpreter skipped if not installed; ~15 s in all), then the markdown tables
# from target/criterion.
#   suite/bench.sh            everything
#   suite/bench.sh powloop    one criterion group (a criterion filter), no scaling
# Run it on a quiet machine: the load average is printed before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ $# -gt 0 ]; then
  cargo bench -p advm-bench --features peers --bench suite -- "$@"
else
  cargo bench -p advm-bench --features peers --bench suite
  cargo bench -p advm-bench --bench scaling
fi
for lua in lua5.4 "luajit -joff"; do
  if command -v "${lua%% *}" >/dev/null; then
    echo "== $lua"
    (cd suite/lua && for prog in sincos powloop logsumexp branchy recursion logreg mlp; do
      $lua "$prog.lua"
    done)
  fi
done
cargo run -q -p suite --release --example table
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
