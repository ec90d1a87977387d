#!/bin/sh
# Package and verify every crate that would be published: advm-vm,
# advm-assembler, advm-adl, advm-ad, advm-jit and advm (testkit, suite and
# advm-bench are `publish = false`; advm-bench is packaged and verified too).
# `--workspace` packages the path dependencies through a temporary local
# registry, and the verify step builds each package from its `.crate` file
# alone, as crates.io would. Too slow for the tests (it builds everything
# again under $CARGO_TARGET_DIR/package); run it after changing a manifest,
# the crates' file layout or what a crate includes.
#
# Usage: scripts/package.sh   (uses $CARGO_TARGET_DIR like any cargo command)
set -eu
cd "$(dirname "$0")/.."
cargo package --workspace --exclude testkit --exclude suite --offline "$@"
