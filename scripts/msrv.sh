#!/bin/sh
# How the minimum Rust version (`rust-version` in Cargo.toml) was found, as
# a check to rerun (no older toolchain is needed):
#
# 1. the `rust-version` each dependency in Cargo.lock declares, over the
#    normal dependencies of `advm` with its default features (the command
#    line) and without them (the library only), and over everything the
#    workspace's tests build;
# 2. the newest standard-library item the code of the four published
#    crates uses: clippy's `incompatible_msrv` with the MSRV set to 1.60
#    lists every item stabilised after it, with the version.
#
# Language features newer than the std items found are not checked by a
# tool; docs/ARCHITECTURE.md ("Crates and publishing") lists what was looked for.
#
# Usage: scripts/msrv.sh   (uses $CARGO_TARGET_DIR like any cargo command)
set -eu
cd "$(dirname "$0")/.."

versions() {
    # "name version" lines of a `cargo tree`, to "rust-version name version",
    # highest first.
    python3 -c '
import json, subprocess, sys
meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--offline"],
                                 check=True, capture_output=True, text=True).stdout)
# Registry packages only: the workspace members inherit its rust-version.
rv = {(p["name"], p["version"]): p.get("rust_version") or "-"
      for p in meta["packages"] if p["source"] is not None}
key = lambda v: [int(x) for x in v.split(".")] if v != "-" else [0]
rows = sorted({tuple(l.split()[:2]) for l in sys.stdin
               if l.strip() and (l.split()[0], l.split()[1].lstrip("v")) in rv},
              key=lambda p: key(rv.get((p[0], p[1].lstrip("v")), "-")), reverse=True)
for n, v in rows[:5]:
    print("  ", rv.get((n, v.lstrip("v")), "-"), n, v)
'
}

echo "advm, default features (library and command line):"
cargo tree -p advm -e normal --prefix none --offline | versions
echo "advm --no-default-features (library only):"
cargo tree -p advm -e normal --no-default-features --prefix none --offline | versions
echo "the workspace with its tests' dependencies:"
cargo tree --workspace -e normal,dev --prefix none --offline | versions

conf=$(mktemp -d)
trap 'rm -rf "$conf"' EXIT
{ cat clippy.toml; echo 'msrv = "1.60"'; } > "$conf/clippy.toml"
echo "standard-library items newer than 1.60 in the published crates (count, version):"
CLIPPY_CONF_DIR="$conf" cargo clippy -p advm --lib --bins --offline -- \
    -A clippy::all -W clippy::incompatible_msrv 2>&1 |
    sed -n 's/.*is stable\( in a `const` context\)\? since `\([0-9.]*\)`.*/\2/p' |
    sort -t. -k1,1n -k2,2n | uniq -c
