"""Which build this is: the version and a digest of the package's code, found from the files
once and then from a cache the files' stat data name; ``trellisd --version`` says it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import trellisd
from trellisd import PROTOCOL_VERSION, __version__
from trellisd.build import build, package_build

PACKAGE = Path(trellisd.__file__).parent


def copy_of_the_package(to: Path) -> Path:
    shutil.copytree(PACKAGE, to, ignore=shutil.ignore_patterns("__pycache__"))
    return to


def test_a_copy_of_the_same_code_is_the_same_build_and_a_change_is_another(
    tmp_path: Path,
) -> None:
    copy = copy_of_the_package(tmp_path / "trellisd")
    assert package_build(str(copy)) == build()
    assert build().startswith(f"{__version__}+") and len(build()) == len(__version__) + 13
    with (copy / "oneline.py").open("a") as changed:
        changed.write("# changed\n")
    changed_build = package_build(str(copy))
    assert changed_build != build() and changed_build.startswith(f"{__version__}+")
    (copy / "extra.py").write_text("")
    assert package_build(str(copy)) not in (build(), changed_build)


def test_the_digest_is_kept_and_read_back_until_a_file_changes(tmp_path: Path) -> None:
    copy = copy_of_the_package(tmp_path / "trellisd")
    first = package_build(str(copy))
    (cache,) = (copy / "__pycache__").glob("build-*")
    assert cache.read_text() == first
    # What the cache says is what a build is, as long as the files' stat data are the same.
    cache.write_text(f"{__version__}+000000000000")
    assert package_build(str(copy)) == f"{__version__}+000000000000"
    (copy / "oneline.py").write_text((copy / "oneline.py").read_text() + "# changed\n")
    assert package_build(str(copy)) != first
    assert [p.name for p in (copy / "__pycache__").glob("build-*")] != [cache.name]
    assert len(list((copy / "__pycache__").glob("build-*"))) == 1


def test_a_package_that_cannot_be_written_is_read_each_time(tmp_path: Path) -> None:
    copy = copy_of_the_package(tmp_path / "trellisd")
    (copy / "__pycache__").write_text("not a folder")
    assert package_build(str(copy)) == build()


def test_the_version_says_the_build() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trellisd", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.stdout == f"trellisd {build()} (protocol {PROTOCOL_VERSION})\n"
