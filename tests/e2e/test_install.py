"""trellisd installed the way people install tools: the wheel and the sdist ``python -m build``
makes, the wheel installed with pipx (by .ci/install-setup.sh) and run from pipx's bin
folder (``trellisd --version``, ``trellisd demo``); and the VS Code extension packaged by vsce
into ``trellisd-<version>.vsix``, which VS Code (code-server) installs. Both artifacts are
copied to ``.ci/artifacts/``, where CI keeps them.

The build needs only its backend (hatchling, a test dependency), so no isolated environment
is fetched. The pipx install is ``.ci/install-setup.sh``'s: pipx fetches trellisd's
dependencies from the package index, as a person's install does, and tests never reach a
network; the test finds the version it runs to be this checkout's very code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.fixtures.environment import hermetic_env
from trellisd import PROTOCOL_VERSION, __version__
from trellisd.build import build

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "daemon" / "trellisd"
EXTENSION = REPO / "editors" / "vscode"
ARTIFACTS = REPO / ".ci" / "artifacts"
PIPX_ROOT = ARTIFACTS / "pipx"
CODE_SERVER = Path(
    os.environ.get("CODE_SERVER", "/opt/code-server-4.100.3/node_modules/.bin/code-server")
)


def run(
    argv: list[str], env: Mapping[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to its end; fail with what it printed unless it exits 0."""
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,  # a prompt would read end of file, not wait
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{' '.join(argv)} did not end within {timeout:g} s: {exc.output!r}")
    if done.returncode != 0:
        pytest.fail(
            f"{' '.join(argv)} exited {done.returncode}\n{done.stdout[-6000:]}\n"
            f"{done.stderr[-6000:]}"
        )
    return done


def keep(artifact: Path) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy2(artifact, ARTIFACTS / artifact.name)


def package_files() -> set[str]:
    """The package's files as a wheel names them (``trellisd/...``), compiled bytecode aside."""
    return {
        "trellisd/" + path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.relative_to(PACKAGE).parts
    }


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist, and the wheel built from it, in a folder of their own."""
    out = tmp_path_factory.mktemp("dist")
    argv = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)]
    run(argv, os.environ, REPO, 600)
    for artifact in out.iterdir():
        keep(artifact)
    return out


@pytest.fixture(scope="module")
def installed() -> Path:
    """``trellisd`` in pipx's bin folder, as ``.ci/install-setup.sh`` installed it from the wheel
    (pipx fetches the dependencies from the package index; the tests themselves stay offline)."""
    trellisd = PIPX_ROOT / "bin" / "trellisd"
    if not trellisd.exists():
        pytest.skip(f"trellisd is not installed with pipx in {PIPX_ROOT}: run .ci/install-setup.sh")
    return trellisd


def tool_env(home: Path, **extra: str) -> dict[str, str]:
    """A user's shell with none of this checkout in sight: no virtual environment, no
    ``PYTHONPATH``, none of the settings of the person running the tests."""
    env = hermetic_env(home, **extra)
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(name, None)
    return env


def test_the_wheel_and_the_sdist_carry_every_file_of_the_package(dist: Path) -> None:
    wheel = zipfile.ZipFile(dist / f"trellisd-{__version__}-py3-none-any.whl")
    in_wheel = {name for name in wheel.namelist() if name.startswith("trellisd/")}
    assert package_files() <= in_wheel, package_files() - in_wheel
    entry_points = wheel.read(f"trellisd-{__version__}.dist-info/entry_points.txt").decode()
    assert "trellisd = trellisd.__main__:main" in entry_points

    top = f"trellisd-{__version__}/"
    with tarfile.open(dist / f"trellisd-{__version__}.tar.gz") as sdist:
        names = set(sdist.getnames())
    in_sdist = {name.removeprefix(top + "daemon/") for name in names}
    assert package_files() <= in_sdist, package_files() - in_sdist
    assert {top + "README.md", top + "pyproject.toml", top + "protocol/schema.json"} <= names


def test_trellisd_installed_with_pipx_runs_the_tour(installed: Path, tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = tool_env(tmp_path / "home", TMPDIR=str(scratch))

    version = run([str(installed), "--version"], env, tmp_path, 120).stdout
    # the very code of this checkout: a window of either attaches to the same shared daemon
    assert version.strip() == f"trellisd {build()} (protocol {PROTOCOL_VERSION})", (
        "the pipx install is of other code than this checkout's: run .ci/install-setup.sh"
    )

    out = run([str(installed), "demo"], env, tmp_path, 300).stdout
    assert "FAIL" not in out and out.rstrip().endswith("all claims held"), out
    assert "[approval asked: edit_file wants to write hello.py]" in out
    assert 'hello.py now reads:\n  print("hello, world")' in out
    pids = [line.rsplit(" ", 1)[1] for line in out.splitlines() if line.startswith("daemon:")]
    assert len(pids) == 2 and pids[0] != pids[1]  # a daemon subprocess, then a new one
    assert list(scratch.iterdir()) == []


@pytest.fixture(scope="module")
def vsix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The extension packaged by vsce as ``trellisd-<version>.vsix`` (its prepublish script
    compiles it first)."""
    vsce = EXTENSION / "node_modules" / ".bin" / "vsce"
    if shutil.which("node") is None or not vsce.exists():
        pytest.skip(
            "the VS Code extension's npm packages are not installed"
            " (editors/vscode/node_modules): run .ci/vscode-setup.sh"
        )
    version = json.loads((EXTENSION / "package.json").read_text())["version"]
    out = tmp_path_factory.mktemp("vsix") / f"trellisd-{version}.vsix"
    env = hermetic_env(tmp_path_factory.mktemp("home"))
    argv = [str(vsce), "package", "--no-rewrite-relative-links", "--out", str(out)]
    done = run(argv, env, EXTENSION, 600)
    said = done.stdout + done.stderr
    # no question vsce would ask at a terminal (a missing repository or LICENSE), no advice
    assert "WARNING" not in said and "[y/N]" not in said, said
    keep(out)
    return out


def test_the_vsix_holds_the_compiled_extension_and_its_runtime_packages_only(
    vsix: Path, tmp_path: Path
) -> None:
    manifest = json.loads((EXTENSION / "package.json").read_text())
    main = "extension/" + os.path.normpath(manifest["main"])
    with zipfile.ZipFile(vsix) as archive:
        names = set(archive.namelist())
        packaged = json.loads(archive.read("extension/package.json"))
        archive.extractall(tmp_path)
    assert main in names and packaged["version"] == manifest["version"]
    assert "extension/LICENSE.txt" in names and "extension/media/chat.js" in names
    left_out = ("extension/src/", "extension/test/", "extension/out/test/", "extension/e2e/")
    assert not [name for name in names if name.startswith(left_out)]
    bundled = {name.split("/")[2] for name in names if name.startswith("extension/node_modules/")}
    scoped = {name.split("/")[3] for name in names if name.startswith("extension/node_modules/@")}
    for dev in manifest["devDependencies"]:
        assert dev.split("/")[0] not in bundled and dev.split("/")[-1] not in scoped, dev

    # The extension loads from the unpacked .vsix alone (VS Code's API stood in for by the
    # extension's own test stand-in): every package it requires was packaged with it.
    stand_in = EXTENSION / "out" / "test" / "setup.js"
    script = (
        f"require({json.dumps(str(stand_in))});"
        f"const e = require({json.dumps(str(tmp_path / main))});"
        "if (typeof e.activate !== 'function') throw new Error('no activate');"
        "const from = Object.keys(require.cache).filter(p => p.includes('/node_modules/'));"
        "console.log(JSON.stringify([...new Set(from.map(p => p.split('/node_modules/')[0]))]));"
    )
    done = run(["node", "-e", script], hermetic_env(tmp_path / "home"), tmp_path, 120)
    assert json.loads(done.stdout) == [str(tmp_path / "extension")]


def test_code_server_installs_the_vsix(vsix: Path, tmp_path: Path) -> None:
    if not CODE_SERVER.exists():
        pytest.skip("code-server is not installed: run .ci/vscode-setup.sh as root")
    extensions = tmp_path / "extensions"
    env = hermetic_env(tmp_path / "home")
    folders = [
        "--extensions-dir",
        str(extensions),
        "--user-data-dir",
        str(tmp_path / "user-data"),
        "--config",
        str(tmp_path / "config.yaml"),
    ]
    run([str(CODE_SERVER), "--install-extension", str(vsix), *folders], env, tmp_path, 300)
    listed = run(
        [str(CODE_SERVER), "--list-extensions", "--show-versions", *folders], env, tmp_path, 300
    )
    version = json.loads((EXTENSION / "package.json").read_text())["version"]
    assert f"trellisd.trellisd@{version}" in listed.stdout.split()
