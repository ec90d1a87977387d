#!/usr/bin/env bash
# Run fuzz targets with cargo-fuzz (libFuzzer), SECONDS each (default 60):
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     targets: assemble verify run_grad modes adl
#
# Needs `cargo install cargo-fuzz`; the stable toolchain is switched into
# nightly mode for the sanitizer flags with RUSTC_BOOTSTRAP=1. What each
# target checks is in testkit/src/checks.rs (the same checks run in CI, without
# cargo-fuzz, as ad/tests/it/fuzz_smoke.rs). Seed corpora: fuzz/seeds/<target>/
# (committed, a few inputs each); programs/**/*.adasm
# for `assemble`, programs/**/*.adl for `adl`; bytecode that verifies (from the smoke test) for `verify`;
# a few fixed seeds for `run_grad`. Corpora grow in
# fuzz/corpus/<target>/ across runs (git-ignored). Crashes land in
# fuzz/artifacts/<target>/; replay one with
#   (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run TARGET artifacts/TARGET/crash-...)
# and turn it into a regression test in ad/tests/it/fuzz_smoke.rs. The last
# lines of each run (libFuzzer's "Done N runs in S second(s)") are printed;
# full logs are in fuzz/logs/<target>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  targets=(assemble verify run_grad modes adl jit_tiers)
fi
export RUSTC_BOOTSTRAP=1
mkdir -p fuzz/corpus/assemble fuzz/corpus/verify fuzz/corpus/run_grad fuzz/corpus/modes fuzz/corpus/adl fuzz/corpus/jit_tiers fuzz/logs
# The committed seeds (fuzz/seeds/<target>/: a few inputs per target, so a
# corpus never starts empty), then the generated ones.
for t in assemble verify run_grad modes adl jit_tiers; do
  cp fuzz/seeds/"$t"/* fuzz/corpus/"$t"/ 2>/dev/null || true
done
find programs -name '*.adasm' -exec cp {} fuzz/corpus/assemble/ \;
find programs -name '*.adl' -exec cp {} fuzz/corpus/adl/ \;
for i in 0 1 2 3 4 5 6 7; do
  # 11-byte run_grad inputs: an 8-byte seed, the family/size knob, the depth,
  # and the mask of the partial gradient (bit k: the k-th f64 / f64[]
  # parameter).
  printf "seed%04d\\x0$i\\x0$((i % 3))\\x0$i" "$i" >"fuzz/corpus/run_grad/seed$i"
  # 10-byte modes inputs: an 8-byte seed, the size knob (its top bit allows
  # kinks), the depth.
  printf "mode%04d\\x0$i\\x0$((i % 2))" "$i" >"fuzz/corpus/modes/seed$i"
done
# The `verify` target's seeds: bytecode that passes the verifier, written by
# the smoke test (random words almost never do).
ADVM_WRITE_VERIFY_SEEDS="$PWD/fuzz/corpus/verify" \
  cargo test -q -p advm-ad --test it fuzz_smoke::verify_target >/dev/null 2>&1 ||
  echo "note: could not write the verify seeds"
# `jit_tiers` reads the same input format as `verify`.
cp fuzz/corpus/verify/* fuzz/corpus/jit_tiers/ 2>/dev/null || true
(cd fuzz && cargo fuzz build -O)
status=0
for target in "${targets[@]}"; do
  echo "== $target: ${secs}s"
  if ! (cd fuzz && cargo fuzz run -O "$target" -- \
      -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1) \
      >"fuzz/logs/$target.log" 2>&1; then
    status=1
    echo "   FAILED: see fuzz/logs/$target.log and fuzz/artifacts/$target/"
  fi
  grep -E "^Done|stat::number_of_executed_units|cov:" "fuzz/logs/$target.log" | tail -n 2
done
exit "$status"
