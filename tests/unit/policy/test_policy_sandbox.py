"""The walls in the policy: a project file only makes them stricter, approval ``auto`` lets
through what they hold, and an escalation is always asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from trellisd.config_file import ConfigError, load_settings
from trellisd.policy import DEFAULT_POLICY, Action, Policy, PolicySpec, load_policy
from trellisd.sandbox.walls import narrower_network, stricter_mode

EXEC = Action("exec", "pytest -q")
WRITE = Action("write", "src/app.py")


def _project(root: Path, text: str) -> Policy:
    (root / ".trellisd.toml").write_text(text)
    return load_policy(root, None)


def test_the_default_walls_are_workspace_write_without_network(tmp_path: Path) -> None:
    policy = load_policy(tmp_path, None)
    assert (policy.effective_sandbox, policy.effective_network) == ("workspace-write", False)


@pytest.mark.parametrize(
    ("written", "sandbox"),
    [('"off"', "workspace-write"), ('"read-only"', "read-only"), ('"workspace-write"', None)],
)
def test_a_project_file_may_only_make_the_walls_stricter(
    tmp_path: Path, written: str, sandbox: str | None
) -> None:
    policy = _project(tmp_path, f"sandbox = {written}\n")
    assert policy.effective_sandbox == (sandbox or "workspace-write")


def test_a_project_file_may_only_narrow_the_network(tmp_path: Path) -> None:
    assert _project(tmp_path, "network = true\n").effective_network is False
    assert _project(tmp_path, 'network = ["pypi.org:443"]\n').effective_network is False
    opened = DEFAULT_POLICY.stacked(Policy(network=("pypi.org:443", "github.com:443")))
    (tmp_path / ".trellisd.toml").write_text('network = ["github.com:443", "evil.com:443"]\n')
    assert load_policy(tmp_path, None, default=opened).effective_network == ("github.com:443",)


def test_narrowing_rules() -> None:
    assert stricter_mode("read-only", "off") == "read-only"
    assert stricter_mode("off", "workspace-write") == "workspace-write"
    assert narrower_network(True, ("a.b:1",)) == ("a.b:1",)
    assert narrower_network(("a.b:1",), True) == ("a.b:1",)
    assert narrower_network(("a.b:1",), False) is False


def test_session_open_may_loosen_the_walls(tmp_path: Path) -> None:
    (tmp_path / ".trellisd.toml").write_text('sandbox = "read-only"\n')
    policy = load_policy(tmp_path, PolicySpec(sandbox="off"))
    assert policy.effective_sandbox == "off"


def test_auto_runs_what_the_walls_hold_and_asks_for_the_rest() -> None:
    auto = DEFAULT_POLICY.stacked(Policy(approval="auto"))
    assert auto.check(EXEC).ruling == "allow"
    assert auto.check(WRITE).ruling == "allow"
    assert auto.check(Action("exec", "mcp:files/delete")).ruling == "ask"
    assert auto.check(Action("write", ".vscode/tasks.json")).ruling == "refuse"  # not named
    read_only = auto.stacked(Policy(sandbox="read-only"))
    assert read_only.check(EXEC).ruling == "allow"
    assert read_only.check(WRITE).ruling == "ask"
    unwalled = auto.stacked(Policy(sandbox="off"))
    assert unwalled.check(EXEC).ruling == "ask"


@pytest.mark.parametrize("approval", ["all", "auto", "ask", "never"])
def test_an_escalation_always_asks_and_no_grant_covers_it(approval: str) -> None:
    escalate = Action("exec", "pytest -q", escalate=True)
    policy = DEFAULT_POLICY.stacked(Policy(approval=approval)).with_grant(EXEC)  # type: ignore[arg-type]
    assert policy.check(escalate).ruling == "ask"
    assert "outside the walls" in policy.check(escalate).reason
    denied = policy.stacked(Policy.from_wire({"layers": [{"name": "d", "denyExec": ["pytest*"]}]}))
    assert denied.check(escalate).ruling == "refuse"


def test_the_config_file_sets_the_walls(tmp_path: Path) -> None:
    folder = tmp_path / "config" / "trellisd"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text(
        'sandbox = "read-only"\nnetwork = ["pypi.org:443"]\nwritable = ["~/.cache/pip"]\n'
        'hidden = ["~/work/keys", "/srv/keys"]\nunconfinedMcp = ["files"]\n'
    )
    home = tmp_path / "home"
    settings = load_settings({"XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(home)})
    policy = settings.policy
    assert policy.effective_sandbox == "read-only"
    assert policy.effective_network == ("pypi.org:443",)
    assert policy.writable == (home / ".cache" / "pip",)
    assert {home / ".ssh", home / "work" / "keys", Path("/srv/keys"), folder} <= set(policy.hidden)
    assert policy.unconfined_servers == ("files",)
    walls = policy.walls(tmp_path, (tmp_path / "store",))
    assert walls.unconfined_servers == {"files"} and tmp_path / "store" in walls.hidden


def test_a_bad_network_in_the_config_file_names_its_line(tmp_path: Path) -> None:
    folder = tmp_path / "trellisd"
    folder.mkdir()
    (folder / "config.toml").write_text('model = "m"\nnetwork = ["no-port"]\n')
    with pytest.raises(ConfigError, match=r"config.toml:2: network must be true, false or a"):
        load_settings({"XDG_CONFIG_HOME": str(tmp_path), "HOME": str(tmp_path)})
