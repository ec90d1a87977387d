#!/usr/bin/env bash
# x86 instructions per call of every suite program (primal by Vm::call_raw,
# gradient by Engine::grad_into), counted by callgrind: deterministic, so
# usable on a loaded machine where timings are not.
#
#   scripts/callgrind.sh [PROGRAM...]        (default: all seven)
#   MODES=1 scripts/callgrind.sh [PROGRAM...]
#
# With MODES=1, the four calls of the modes bench instead (primal by
# Engine::run, gradient, jvp and hvp with respect to every f64 and f64[]
# parameter, along all ones; `suite::modes`) and the ratios jvp / primal
# and hvp / grad.
#
# Each figure is (Ir of N calls - Ir of 0 calls) / N, from
# `target/release/examples/profile PROGRAM WHAT Nx`, so set-up (assembling,
# deriving) cancels out. Also prints the bytecode instructions per call and
# how many indirect jumps the interpreter loop `vm::interp::Vm::exec` has:
# LLVM replicates the dispatch `jmp *` into most handlers only under its
# tail-duplication thresholds, and an unrelated edit to `exec` can undo
# that (about 10% more instructions when it does), so compare this count
# before and after changing the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }
cargo build -p suite --features peers --release --example profile
bin="${CARGO_TARGET_DIR:-target}/release/examples/profile"
progs=("$@")
if [ "${#progs[@]}" -eq 0 ]; then
  progs=(sincos powloop logsumexp branchy recursion logreg mlp)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() {
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$@" >/dev/null 2>"$tmp/err"
  awk '/^summary:/ {print $2; exit}' "$tmp/cg.out"
}
if [ -n "${MODES:-}" ]; then
  printf '%-10s %12s %12s %12s %12s %8s %8s\n' program primal grad jvp hvp jvp/pr hvp/gr
  for p in "${progs[@]}"; do
    n=200
    [ "$p" = sincos ] && n=20000
    row=()
    for what in modes_primal modes_grad modes_jvp modes_hvp; do
      a=$(ir "$bin" "$p" "$what" 0x)
      b=$(ir "$bin" "$p" "$what" "${n}x")
      row+=($(((b - a) / n)))
    done
    printf '%-10s %12s %12s %12s %12s %8s %8s\n' "$p" "${row[@]}" \
      "$(awk -v a="${row[2]}" -v b="${row[0]}" 'BEGIN {printf "%.2f", a / b}')" \
      "$(awk -v a="${row[3]}" -v b="${row[1]}" 'BEGIN {printf "%.2f", a / b}')"
  done
else
  printf '%-10s %12s %12s\n' program primal grad
  for p in "${progs[@]}"; do
    n=200
    [ "$p" = sincos ] && n=20000
    row=()
    for what in advm_primal advm_grad; do
      a=$(ir "$bin" "$p" "$what" 0x)
      b=$(ir "$bin" "$p" "$what" "${n}x")
      row+=($(((b - a) / n)))
    done
    printf '%-10s %12s %12s\n' "$p" "${row[0]}" "${row[1]}"
  done
fi
"$bin" all counts
if command -v objdump >/dev/null; then
  # exec's start, and the next symbol's start as its end.
  read -r start stop < <(nm -C -n "$bin" | awk '
    found && $1 != start {print "0x" start, "0x" $1; exit}
    / vm::interp::(exec::<impl vm::interp::Vm>|Vm)::exec$/ {start = $1; found = 1}')
  jumps=$(objdump -d --no-show-raw-insn --start-address="$start" --stop-address="$stop" "$bin" |
    grep -c 'jmp  *\*' || true)
  echo "indirect jumps in vm::interp::Vm::exec: $jumps"
fi
