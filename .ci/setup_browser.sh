#!/usr/bin/env bash
# Headless Chromium for the app's end-to-end browser test (tests/app/test_browser.py), from Debian's packages.
# Idempotent and quiet: does nothing when /usr/bin/chromium is there. Playwright drives this binary
# (executable_path); `playwright install` (a browser download) is never used.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup_browser: no apt-get here; the browser test will skip" >&2
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "setup_browser: not root and no sudo; the browser test will skip" >&2
        exit 0
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq chromium >/dev/null
/usr/bin/chromium --version 2>/dev/null | head -n 1
