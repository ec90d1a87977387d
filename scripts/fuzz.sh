#!/usr/bin/env bash
# Run every fuzz target for SECONDS each (default 60) with cargo-fuzz
# (libFuzzer). Needs `cargo install cargo-fuzz`; the stable toolchain is
# switched into nightly mode for the sanitizer flags with RUSTC_BOOTSTRAP=1.
# The assembler's seed corpus is programs/**/*.adasm. Crashes land in
# fuzz/artifacts/<target>/ and must become regression tests.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
export RUSTC_BOOTSTRAP=1
mkdir -p fuzz/corpus/assemble
find programs -name '*.adasm' -exec cp {} fuzz/corpus/assemble/ \;
for target in assemble verify run_grad; do
  echo "== $target: ${secs}s"
  (cd fuzz && cargo fuzz run "$target" -- -max_total_time="$secs" -rss_limit_mb=2048) 2>&1 | tail -n 3
done
