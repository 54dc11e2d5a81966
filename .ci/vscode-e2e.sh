#!/usr/bin/env bash
# The VS Code extension in a real VS Code (code-server, from .ci/vscode-setup.sh) driven in
# headless Chromium: packages the extension, installs it, and runs editors/vscode/e2e/run.mjs.
# Screenshots go to E2E_ARTIFACTS (default editors/vscode/.e2e), never over tracked files.
#
# The daemon: TRELLISD_TEST_CMD if set, else the repository's .venv (as .ci/run makes it),
# else `python3 -m trellisd`.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${TRELLISD_TEST_CMD:-}" ] && [ -x "$repo/.venv/bin/python" ]; then
  export TRELLISD_TEST_CMD="$repo/.venv/bin/python -m trellisd"
fi
export CODE_SERVER=${CODE_SERVER:-/opt/code-server-4.100.3/node_modules/.bin/code-server}

cd "$repo/editors/vscode"
started=$(date +%s)
npm run --silent test:e2e
echo "[vscode-e2e] $(($(date +%s) - started))s in all"
