#!/usr/bin/env bash
# Installs trellisd the way a person installs a tool, for tests/e2e/test_install.py: builds the
# wheel from this checkout (`python -m build`, its backend from the package index) and installs
# it with pipx into folders of its own under .ci/artifacts/pipx, fetching its dependencies from
# the package index as a person's install does. The tests then run that `trellisd` offline.
# Safe to run again: the install is replaced.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
artifacts="$repo/.ci/artifacts"
pipx_root="$artifacts/pipx"

"$python" -m pip install -q build hatchling pipx
rm -rf "$artifacts/wheel" "$pipx_root"
"$python" -m build --no-isolation --wheel --outdir "$artifacts/wheel" "$repo"
wheel=$(ls "$artifacts"/wheel/trellisd-*.whl)
env -u VIRTUAL_ENV PIPX_HOME="$pipx_root/home" PIPX_BIN_DIR="$pipx_root/bin" \
  PIPX_MAN_DIR="$pipx_root/man" USE_EMOJI=0 "$python" -m pipx install --force "$wheel"
echo "installed: $pipx_root/bin/trellisd"
