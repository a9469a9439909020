#!/usr/bin/env bash
# The test command (README): installs what the tests need when it is missing, then runs every
# test. Idempotent; on a machine that has everything it goes straight to the tests.
#   bash test.sh            # everything, as CI runs it
#   bash test.sh --quick    # the cargo tests only (no gperftools comparison, no fuzz run)
# Under CI=true a test whose external tool is missing fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")"
quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; fi

sudo_cmd=""
if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi

# Debian packages the tests use: golang-go (the real `go tool pprof` reads our pprof files and
# is compared with our views), graphviz (`tickscope graph -o x.svg` renders with `dot`),
# google-perftools (a real gperftools CPU profile for the legacy reader; libprofiler.so and
# google-pprof for the comparison below), gcc and g++ to build the C and C++ programs the
# tests profile and link against libtickscope, python3 (+ venv) for the comparison script and
# the Perfetto reader, chromium and node/npm for speedscope, libc6-dbg (libc's separate debug
# file, which the symboliser finds by build id).
missing=""
command -v go >/dev/null 2>&1 || missing="$missing golang-go"
command -v dot >/dev/null 2>&1 || missing="$missing graphviz"
command -v gcc >/dev/null 2>&1 || missing="$missing gcc"
command -v g++ >/dev/null 2>&1 || missing="$missing g++"
ldconfig -p 2>/dev/null | grep -q 'libprofiler\.so' || missing="$missing libgoogle-perftools4"
command -v google-pprof >/dev/null 2>&1 || missing="$missing google-perftools"
command -v python3 >/dev/null 2>&1 || missing="$missing python3"
command -v make >/dev/null 2>&1 || missing="$missing make"
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
dpkg -s libc6-dbg >/dev/null 2>&1 || missing="$missing libc6-dbg"
if [ -n "$missing" ]; then
    echo "test.sh: installing Debian packages:$missing" >&2
    $sudo_cmd apt-get update -qq
    # shellcheck disable=SC2086
    $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

# The exporters' tests read our speedscope / Chrome-trace / Perfetto files with real readers:
# speedscope in Debian's headless chromium, and Perfetto's published protos (PyPI perfetto).
bash tests/readers/install.sh

# A test that hangs fails the run within 45 minutes (libtest has named it by then: "has
# been running for over 60 seconds"), rather than holding CI until CI's own limit ends it
# with nothing said: a capture test once did. A loaded 2-core run takes 10-15 minutes.
rc=0
timeout 2700 cargo test --workspace || rc=$?
if [ "$rc" = 124 ]; then
    echo "test.sh: cargo test ran past 45 minutes and was stopped: see the tests named as still running above" >&2
fi
if [ "$rc" != 0 ]; then exit "$rc"; fi

if [ "$quick" = 1 ]; then exit 0; fi

# The core crate with scopes alone (`default-features = false, features = ["enabled"]`, no
# sampler or capture), as a user who wants only the counters builds it: no warning.
cargo clippy --quiet -p tickscope --no-default-features --features enabled --all-targets -- -D warnings

# The API docs build without a warning (a link to a private or feature-gated item, say).
RUSTDOCFLAGS="-D warnings" cargo doc --quiet --workspace --no-deps

# Every crate packages with its metadata, in an order crates.io accepts (each after what it
# depends on); nothing is uploaded.
if ! out=$(cargo publish --workspace --dry-run --no-verify --allow-dirty 2>&1); then
    echo "$out" >&2
    exit 1
fi

# The fuzz targets (a separate workspace) must keep building: `cargo +nightly fuzz run` needs
# them, and stable checks them.
cargo check --quiet --manifest-path fuzz/Cargo.toml

# tickscope record against gperftools on a C workload with a known CPU split, short form
# (the debug build the tests made): asserts tickscope's accounting and top-5 shares.
python3 crates/preload/bench/compare_gperftools.py --debug --ms 1000 --rounds 1 --assert

# A short fuzz run of every profile reader (about a minute in all): cargo-fuzz needs a
# nightly toolchain; both are installed here if missing. Long runs are done by hand.
bash fuzz/run-short.sh
