#!/usr/bin/env bash
# Run the vm and ad test binaries (unit and integration tests) under
# valgrind's memcheck, with the `vm/checked` feature OFF: the unchecked
# register accesses of vm/src/regs.rs (the only `unsafe` in advm) are what
# this checks. Exit status 1 if valgrind reports any error.
#
#   scripts/valgrind.sh [TEST-FILTER...]
#
# Property tests run with fewer cases under valgrind (about 50x slower):
# ADVM_PROP_CASES, ADVM_DIFF_CASES default to 40 here; set them to override.
# Leaks are not errors here (test harness threads and statics are not freed
# at exit); invalid reads/writes and uses of uninitialised memory are.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }
export ADVM_PROP_CASES="${ADVM_PROP_CASES:-40}"
export ADVM_DIFF_CASES="${ADVM_DIFF_CASES:-40}"
export RUST_BACKTRACE=0

# Build the test binaries (default features: vm/checked is off) and list them.
bins=$(cargo test -p advm-vm -p advm-ad --tests --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])
')
if [ -z "$bins" ]; then
  echo "no test binaries built" >&2
  exit 2
fi
# The feature must really be off in what we run.
if cargo tree --workspace -e features -i vm 2>/dev/null | grep -q 'vm feature "checked"'; then
  echo "vm/checked is enabled in this build; valgrind would not test the unsafe path" >&2
  exit 2
fi

status=0
log_dir=target/valgrind
mkdir -p "$log_dir"
for bin in $bins; do
  name=$(basename "$bin")
  start=$(date +%s)
  if valgrind --error-exitcode=1 --leak-check=no --track-origins=yes \
      --log-file="$log_dir/$name.log" -q \
      "$bin" --test-threads=2 "$@" >"$log_dir/$name.out" 2>&1; then
    result=ok
  else
    result=FAILED
    status=1
  fi
  summary=$(grep -E "^test result" "$log_dir/$name.out" | tail -n 1 || true)
  echo "$result $name ($(( $(date +%s) - start ))s): ${summary:-no test summary}"
  if [ "$result" = FAILED ]; then
    tail -n 30 "$log_dir/$name.log" "$log_dir/$name.out"
  fi
done
exit "$status"
