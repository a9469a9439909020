#!/usr/bin/env bash
# A short run of every profile reader's fuzz target (about 15 s each), seeded with the real
# profiles in tests/data/pprof. Installs a nightly toolchain and cargo-fuzz if missing.
# Usage: bash fuzz/run-short.sh [SECONDS_PER_TARGET]
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-15}"
if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
testdata=../tests/data/pprof
# The protobuf target reads raw (not gzip) protobuf: seed it with the profiles unzipped.
mkdir -p corpus/pprof_read
for f in "$testdata"/*.pb.gz; do
    if [ -f "$f" ] && [ "$(stat -c %s "$f")" -lt 100000 ]; then
        gzip -dc "$f" >"corpus/pprof_read/$(basename "$f" .gz)"
    fi
done
mkdir -p corpus/legacy_read
for f in "$testdata"/legacy/*; do
    case "$f" in *.top.txt) ;; *) cp -f "$f" corpus/legacy_read/ ;; esac
done
mkdir -p corpus/folded_read
printf 'main;parse;tokenize 42\nmain;alloc 7\n' > corpus/folded_read/seed
for target in pprof_read legacy_read folded_read; do
    echo "fuzz: $target for ${seconds}s"
    log="target/fuzz-$target.log"
    mkdir -p target
    if ! cargo +nightly fuzz run "$target" -- -max_total_time="$seconds" -rss_limit_mb=2048 \
        -max_len=65536 >"$log" 2>&1; then
        tail -40 "$log" >&2
        echo "fuzz: $target failed (crash inputs in fuzz/artifacts/$target; log $log)" >&2
        exit 1
    fi
    grep -E '^#[0-9]+.*DONE|^Done [0-9]+ runs' "$log" | tail -1
done
