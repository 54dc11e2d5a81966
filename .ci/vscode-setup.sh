#!/usr/bin/env bash
# Installs what the VS Code extension's tests need, on a fresh Debian bookworm machine as root,
# from the package registries only: the extension's npm packages (npm ci), Debian's chromium
# (for playwright-core), and code-server 4.100.3 (a real VS Code in the browser). Safe to run
# again: what is already there is kept.
#
# code-server 4.100.3 is the last release for Node 20. Its postinstall runs `npm install` in
# lib/vscode, which builds native modules (kerberos needs Debian's libkrb5-dev) and runs
# @vscode/ripgrep's postinstall, which downloads rg from GitHub. That download cannot happen
# here, so Debian's rg is put first where that postinstall looks for a cached download.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
CODE_SERVER_VERSION=4.100.3
CODE_SERVER_PREFIX=${CODE_SERVER_PREFIX:-/opt/code-server-$CODE_SERVER_VERSION}
# Pinned by code-server 4.100.3's lib/vscode/npm-shrinkwrap.json (@vscode/ripgrep 1.15.11),
# whose lib/postinstall.js fetches release v13.0.0-10 of microsoft/ripgrep-prebuilt and first
# looks in $TMPDIR/vscode-ripgrep-cache-<package version>/ripgrep-<release>-<target>.tar.gz
# for a tar.gz holding `rg` at its top.
RIPGREP_PACKAGE_VERSION=1.15.11
RIPGREP_RELEASE=v13.0.0-10

started=$(date +%s)
say() { echo "[vscode-setup $(($(date +%s) - started))s] $*"; }

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo none)
if [ "$node_major" != 20 ]; then
  echo "vscode-setup: code-server $CODE_SERVER_VERSION needs Node.js 20; found: $node_major" >&2
  exit 1
fi

missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v rg >/dev/null || missing+=(ripgrep)
command -v krb5-config >/dev/null || missing+=(libkrb5-dev)
command -v make >/dev/null || missing+=(make)
command -v g++ >/dev/null || missing+=(g++)
command -v python3 >/dev/null || missing+=(python3)
if [ ${#missing[@]} -gt 0 ]; then
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

say "npm ci in editors/vscode"
(cd "$repo/editors/vscode" && npm ci --no-audit --no-fund)

installed=$(node -p "try { require('$CODE_SERVER_PREFIX/node_modules/code-server/package.json').version } catch { '' }")
if [ "$installed" = "$CODE_SERVER_VERSION" ] && [ -x "$CODE_SERVER_PREFIX/node_modules/.bin/code-server" ] \
  && [ -e "$CODE_SERVER_PREFIX/node_modules/code-server/lib/vscode/node_modules/@vscode/ripgrep/bin/rg" ]; then
  say "code-server $CODE_SERVER_VERSION is already in $CODE_SERVER_PREFIX"
else
  case "$(uname -m)" in
    x86_64) target=x86_64-unknown-linux-musl ;;
    aarch64 | arm64) target=aarch64-unknown-linux-musl ;;
    *) echo "vscode-setup: no ripgrep target for $(uname -m)" >&2; exit 1 ;;
  esac
  cache="$(node -p 'require("os").tmpdir()')/vscode-ripgrep-cache-$RIPGREP_PACKAGE_VERSION"
  archive="$cache/ripgrep-$RIPGREP_RELEASE-$target.tar.gz"
  staging=$(mktemp -d)
  cp "$(command -v rg)" "$staging/rg"
  mkdir -p "$cache"
  tar -czf "$archive" -C "$staging" rg
  rm -rf "$staging"
  say "Debian's rg is in $archive"

  # A plain local install in its own folder: a global one (-g, --prefix) exports
  # npm_config_global to code-server's postinstall, whose nested `npm install` then installs
  # into the wrong tree and fails.
  say "npm install code-server@$CODE_SERVER_VERSION in $CODE_SERVER_PREFIX"
  rm -rf "$CODE_SERVER_PREFIX"
  mkdir -p "$CODE_SERVER_PREFIX"
  echo '{"name": "code-server-install", "private": true}' >"$CODE_SERVER_PREFIX/package.json"
  (cd "$CODE_SERVER_PREFIX" &&
    npm_config_unsafe_perm=true npm_config_yes=true \
      npm install --no-audit --no-fund --loglevel=error "code-server@$CODE_SERVER_VERSION")
fi
"$CODE_SERVER_PREFIX/node_modules/.bin/code-server" --help >/dev/null
say "done: $CODE_SERVER_PREFIX/node_modules/.bin/code-server, $(chromium --version 2>/dev/null)"
