#!/usr/bin/env bash
# Installs what the walls around the model's programs need: bubblewrap (bwrap), from
# Debian's packages, when it is missing. The walls' tests skip, saying why, where it is
# missing; the daemon refuses to run a command unconfined. Idempotent and non-interactive
# (root, Debian): run it as often as you like.
#
#   bash .ci/sandbox-setup.sh
set -euo pipefail

if command -v bwrap >/dev/null; then
  echo "sandbox-setup: $(bwrap --version) already at $(command -v bwrap)"
else
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq bubblewrap >/dev/null
  echo "sandbox-setup: installed $(bwrap --version)"
fi
# Say what the walls can do here (user namespaces may be off on a CI machine).
if [ -n "${PYTHON:-}" ] && "$PYTHON" -c 'import trellisd' 2>/dev/null; then
  "$PYTHON" -m trellisd doctor || echo "sandbox-setup: the default walls cannot be built here"
fi
