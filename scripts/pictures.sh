#!/usr/bin/env bash
# Regenerate the pictures of docs/pictures/ (needs Graphviz `dot`):
#
#   scripts/pictures.sh
#
# * powloop.svg: the CFG of programs/bench/powloop.adasm's @pow;
# * powloop-ad.svg: its forward and reverse CFGs (`advm cfg --ad`);
# * walk-ad.svg: branch_in_loop's forward and reverse CFGs (a branch in a
#   loop: block ids pushed at the join, popped by the reverse dispatch).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v dot >/dev/null || { echo "Graphviz dot is not installed" >&2; exit 2; }
cargo build -q --release -p advm
advm=target/release/advm
out=docs/pictures
mkdir -p "$out"
"$advm" cfg programs/bench/powloop.adasm --fn pow | dot -Tsvg >"$out/powloop.svg"
"$advm" cfg programs/bench/powloop.adasm --fn pow --ad | dot -Tsvg >"$out/powloop-ad.svg"
"$advm" cfg programs/branch_in_loop.adasm --fn walk --ad | dot -Tsvg >"$out/walk-ad.svg"
echo "wrote $out/powloop.svg, $out/powloop-ad.svg, $out/walk-ad.svg"
