#!/usr/bin/env bash
# What CI checks, to run locally: the README's test command, formatting, clippy.
set -euo pipefail
cd "$(dirname "$0")"
cargo test --workspace
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
