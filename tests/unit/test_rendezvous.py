"""Where a window finds its store's shared daemon, and what the forwarder reads of its command
line and says first: in-process, no daemon."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from trellisd import __version__
from trellisd.build import build
from trellisd.forward import serve_arguments
from trellisd.rendezvous import (
    MAX_SOCKET_PATH,
    Place,
    Unsafe,
    daemon_environment,
    end_record,
    hello,
    own_folder,
    private_folder,
    shared_mode,
    store_file,
)


def test_one_socket_per_store_and_build_in_the_runtime_folder(tmp_path: Path) -> None:
    env = {"XDG_RUNTIME_DIR": "/run/user/1000"}
    a, again, b = Place("/a/t.db", env), Place("/a/t.db", env), Place("/b/t.db", env)
    assert a.socket == again.socket != b.socket
    assert a.folder == "/run/user/1000/trellisd"
    assert os.path.basename(a.socket).startswith(f"{build()}-")
    assert build().startswith(f"{__version__}+")
    assert a.socket.endswith(".sock") and a.log.endswith(".log")


def test_a_runtime_folder_too_long_for_a_socket_falls_back_to_a_short_one() -> None:
    long_runtime = "/run/" + "x" * 120
    place = Place("/a/t.db", {"XDG_RUNTIME_DIR": long_runtime})
    assert len(place.socket) <= MAX_SOCKET_PATH
    assert place.folder == f"/tmp/trellisd-{os.getuid()}"
    assert Place("/a/t.db", {}).folder == place.folder


def test_a_relative_store_path_names_the_same_daemon_as_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert Place("t.db", {}).socket == Place(str(tmp_path / "t.db"), {}).socket


def test_the_folder_is_made_private(tmp_path: Path) -> None:
    place = Place("/a/t.db", {"XDG_RUNTIME_DIR": str(tmp_path)})
    place.make_folder()
    assert os.stat(place.folder).st_mode & 0o777 == 0o700
    os.chmod(place.folder, 0o755)
    place.make_folder()
    assert os.stat(place.folder).st_mode & 0o777 == 0o700


def test_a_symlink_or_a_file_is_refused_as_the_folder_and_left_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir(mode=0o755)
    target.chmod(0o755)
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(Unsafe, match="it is a symlink, not a folder"):
        private_folder(str(tmp_path / "link"))
    assert target.stat().st_mode & 0o777 == 0o755
    (tmp_path / "file").write_text("")
    with pytest.raises(Unsafe, match="it is not a folder"):
        private_folder(str(tmp_path / "file"))


def test_a_folder_of_the_users_own_is_made_once_and_found_again(tmp_path: Path) -> None:
    base = tempfile.mkdtemp(prefix="tp", dir="/tmp")  # short enough for a socket's path
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "TMPDIR": base}
    folder = own_folder(env)
    assert os.path.dirname(folder) == base
    assert os.path.basename(folder).startswith(f"trellisd-{os.getuid()}-")
    assert os.stat(folder).st_mode & 0o777 == 0o700
    assert own_folder(env) == folder
    os.rmdir(folder)  # cleaned away: a new one, never the recorded name made again
    again = own_folder(env)
    assert again != folder and not os.path.exists(folder)
    shutil.rmtree(base)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], (None, "warning", "attach")),
        (["serve"], (None, "warning", "attach")),
        (["--db", "/x.db"], ("/x.db", "warning", "attach")),
        (["serve", "--db=/x.db", "--log-level", "debug"], ("/x.db", "debug", "attach")),
        (["--log-level=info", "serve"], (None, "info", "attach")),
        (["acp", "--db", "/x.db"], ("/x.db", "warning", "acp")),
        (["acp"], (None, "warning", "acp")),
        (["acp", "serve"], None),
        (["--db", "/x.db", "acp"], None),
        (["acp", "--standalone"], None),
        (["--standalone"], None),
        (["status"], None),
        (["--help"], None),
        (["--db"], None),
        (["--log-level", "loud"], None),
    ],
)
def test_only_the_plain_command_line_of_an_editor_attaches_without_the_full_parser(
    args: list[str], expected: tuple[str | None, str, str] | None
) -> None:
    assert serve_arguments(args, {}) == expected


def test_standalone_by_environment() -> None:
    assert shared_mode(False, {}) and shared_mode(False, {"TRELLISD_SHARED": "1"})
    assert not shared_mode(True, {})
    assert not any(shared_mode(False, {"TRELLISD_SHARED": v}) for v in ("0", "false", "off"))
    assert serve_arguments([], {"TRELLISD_SHARED": "0"}) is None


def test_a_window_hands_over_its_environment_less_the_secrets_its_settings_do_not_need(
    tmp_path: Path,
) -> None:
    (tmp_path / "trellisd").mkdir()
    (tmp_path / "trellisd" / "config.toml").write_text(
        'keyVariable = "WORK_KEY"\npassEnv = ["NPM_TOKEN"]\n'
    )
    env = {
        "XDG_CONFIG_HOME": str(tmp_path),
        "TRELLISD_API_KEY": 'sk-"quoted"\\\n\u00e9',
        "OPENAI_API_KEY": "sk-openai",
        "WORK_KEY": "sk-work",
        "NPM_TOKEN": "npm",
        "TRELLISD_DB": "/x.db",
        "PATH": "/bin",
        "NOT_UTF8": "caf\udce9",
        "AWS_SECRET_ACCESS_KEY": "no",
        "DATABASE_URL": "postgres://app:pw@db/app",
    }
    said = json.loads(hello(env))
    assert said == {
        "trellisd": build(),
        "command": "attach",
        "pid": os.getpid(),
        "env": {k: v for k, v in env.items() if k not in ("AWS_SECRET_ACCESS_KEY", "DATABASE_URL")},
    }
    assert json.loads(hello({}, "status"))["env"] == {}
    assert daemon_environment(env) == {
        "XDG_CONFIG_HOME": str(tmp_path),
        "TRELLISD_DB": "/x.db",
        "PATH": "/bin",
        "NOT_UTF8": "caf\udce9",
        "AWS_SECRET_ACCESS_KEY": "no",
        "DATABASE_URL": "postgres://app:pw@db/app",
    }


def test_the_end_record_says_the_exit_code_and_why() -> None:
    record = end_record(1, 'the "daemon" stopped')
    assert record[:4] == b"\xff\xff\xff\xff"
    assert json.loads(record[8:]) == {"exit": 1, "message": 'the "daemon" stopped'}


def test_a_store_that_cannot_be_a_file_is_refused_in_words(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is a folder; give the path of a file"):
        store_file(str(tmp_path), {})
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        store_file(str(tmp_path / "f" / "t.db"), {})
    assert store_file(None, {"XDG_DATA_HOME": "/d"}) == "/d/trellisd/trellisd.db"


def test_what_an_editor_starts_imports_nothing_of_the_daemon() -> None:
    """The forwarder's imports: the standard library's light modules, never the daemon's
    libraries or the full command line's parser."""
    import subprocess
    import sys

    probe = "import sys, trellisd.__main__, trellisd.forward; print(' '.join(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(done.stdout.split())
    heavy = {"pygls", "lsprotocol", "attrs", "cattrs", "httpx", "apsw", "argparse", "asyncio"}
    assert not loaded & heavy
    assert not any(name.startswith(("trellisd.server", "trellisd.cli")) for name in loaded)
