#!/usr/bin/env bash
# Installs the MCP server the MCP tests run from npm: @modelcontextprotocol/server-filesystem,
# into tests/mcp-servers/node_modules (ignored by git). The tests that need it skip, saying
# why, where it is missing. Idempotent and non-interactive: run it as often as you like.
#
#   bash .ci/mcp-setup.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
folder="$repo/tests/mcp-servers"
package=@modelcontextprotocol/server-filesystem
version=2026.8.31
entry="$folder/node_modules/$package/dist/index.js"

if ! command -v npm >/dev/null; then
  echo "mcp-setup: npm is needed (Node.js 18 or later)" >&2
  exit 1
fi
if [ -f "$entry" ] && grep -q "\"version\": \"$version\"" "$folder/node_modules/$package/package.json"; then
  echo "mcp-setup: $package $version already at $folder"
  exit 0
fi
mkdir -p "$folder"
cd "$folder"
[ -f package.json ] || echo '{"name": "trellisd-test-mcp-servers", "private": true}' > package.json
npm install --silent --no-audit --no-fund --no-save "$package@$version"
echo "mcp-setup: $package $version at $folder"
