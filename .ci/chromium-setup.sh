#!/usr/bin/env bash
# Installs Debian's chromium for the browser view's tests (tests/e2e/test_view*.py), which
# drive it with playwright (its Python package, never `playwright install`). Root, Debian.
# Safe to run again: an installed chromium is kept.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo present)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y chromium
