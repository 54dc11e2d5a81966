#!/usr/bin/env bash
# Installs what the ACP tests need: the TypeScript ACP SDK (@agentclientprotocol/sdk 1.9, the
# last release with ClientSideConnection, which drives `trellisd acp` in the tests; it ships
# the ACP v1 JSON schema) into tests/acp_client/node_modules (gitignored), and the Python ACP
# SDK (agent-client-protocol)
# into the Python that runs pytest: $PYTHON (default python3). Needs node and npm.
# Idempotent and non-interactive: run it as often as you like.
#
#   PYTHON=.venv/bin/python bash .ci/acp-setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
SDK_VERSION="1.9.0"

if ! "$PYTHON" -c 'import acp' 2>/dev/null; then
  "$PYTHON" -m pip install --quiet --disable-pip-version-check "agent-client-protocol>=0.12,<0.13"
fi

if ! command -v npm >/dev/null; then
  echo "acp-setup: npm not found; install Node.js (18 or newer) with npm first" >&2
  exit 1
fi

installed="tests/acp_client/node_modules/@agentclientprotocol/sdk/package.json"
if [ ! -f "$installed" ] || ! grep -q "\"version\": \"$SDK_VERSION\"" "$installed"; then
  npm install --silent --no-save --no-audit --no-fund --prefix tests/acp_client \
    "@agentclientprotocol/sdk@$SDK_VERSION"
fi
echo "acp-setup: @agentclientprotocol/sdk $SDK_VERSION in tests/acp_client/node_modules"
echo "acp-setup: agent-client-protocol $("$PYTHON" -c 'import importlib.metadata as m; print(m.version("agent-client-protocol"))')"
