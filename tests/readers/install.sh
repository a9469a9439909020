#!/usr/bin/env bash
# Install the real third-party readers that tickscope's integration tests check exported
# timelines with (see README.md beside this file). Idempotent; does nothing when all is there.
#   * Debian's chromium (/usr/bin/chromium) - headless browser for speedscope
#   * npm ci: speedscope (its built web app) + playwright-core, pinned in package-lock.json
#   * a Python venv (.venv) with perfetto (Perfetto's compiled protos) + protobuf
set -euo pipefail
cd "$(dirname "$0")"

sudo_cmd=""
if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi

# 1. Chromium from Debian. Never let a tool download its own browser build.
if [ ! -x /usr/bin/chromium ]; then
    echo "readers: installing Debian's chromium" >&2
    $sudo_cmd apt-get update -qq
    $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

# 2. npm packages, exactly as locked. Re-run when node_modules is missing or older than the lock.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "readers: node and npm are needed (Node >= 20)" >&2
    exit 1
fi
stamp=node_modules/.package-lock.json   # npm writes this on every install
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ] \
    || [ ! -f node_modules/speedscope/dist/release/index.html ] \
    || [ ! -d node_modules/playwright-core ]; then
    echo "readers: npm ci" >&2
    # playwright-core has no install script; this keeps any browser download off anyway.
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >/dev/null
    touch "$stamp"
fi

# 3. Python venv with pinned perfetto + protobuf. Re-run when requirements.txt changed.
if [ ! -x .venv/bin/python ] || [ ! -f .venv/.requirements.txt ] \
    || ! cmp -s requirements.txt .venv/.requirements.txt; then
    echo "readers: creating .venv (pip install -r requirements.txt)" >&2
    if [ ! -x .venv/bin/python ]; then
        if ! python3 -m venv .venv 2>/dev/null; then
            # Debian's python3 needs python3-venv for `-m venv` (ensurepip).
            rm -rf .venv
            $sudo_cmd apt-get update -qq
            $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
            python3 -m venv .venv
        fi
    fi
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
    cp requirements.txt .venv/.requirements.txt
fi
