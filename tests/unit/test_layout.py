"""The package's layout holds: no import cycle (type-only imports count), and the layers
import only what they may."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "daemon" / "trellisd"


def _module(path: Path) -> str:
    parts = ["trellisd", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str) -> set[str]:
    """Every module ``name`` imports, under TYPE_CHECKING too."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.add(child if child in MODULES else base)
    return found


def test_no_module_imports_itself_through_others() -> None:
    graph = {name: {m for m in _imports(name) if m in MODULES} for name in MODULES}
    cycles: list[list[str]] = []

    def visit(name: str, path: list[str]) -> None:
        for nxt in sorted(graph[name]):
            if nxt in path:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in done:
                visit(nxt, [*path, nxt])
        done.add(name)

    done: set[str] = set()
    for name in sorted(MODULES):
        if name not in done:
            visit(name, [name])
    # A package's __init__ importing its own submodules is how packages are built.
    real = [c for c in cycles if not all(c[0].startswith(m) or m.startswith(c[0]) for m in c)]
    assert real == []


WIRE = ("trellisd.server", "trellisd.handlers", "trellisd.wire")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_only_the_wire_knows_pygls_and_only_providers_speak_http(name: str) -> None:
    imported = {m.split(".")[0] for m in _imports(name)}
    if not name.startswith(WIRE):
        assert "pygls" not in imported and "lsprotocol" not in imported
    if not name.startswith("trellisd.providers"):
        assert "httpx" not in imported


@pytest.mark.parametrize("name", sorted(MODULES))
def test_the_daemon_speaks_acp_without_the_acp_sdk_or_pydantic(name: str) -> None:
    """``trellisd acp`` starts fast: the SDK's pydantic models cost more than the whole
    native server's imports. The SDK is the tests' client, and only the MCP client (loaded
    when a session has MCP servers) brings pydantic."""
    imported = {m.split(".")[0] for m in _imports(name)}
    assert "acp" not in imported
    if not name.startswith("trellisd.mcp"):
        assert "pydantic" not in imported


def test_the_wire_renders_what_the_services_return_and_prices_nothing() -> None:
    """A turn's cost is the ledger's (the store prices each step as it commits): converting
    a turn for the wire computes nothing."""
    assert not {m for m in _imports("trellisd.wire") if m.startswith("trellisd.pricing")}


def test_one_name_per_concept_no_class_name_is_defined_twice() -> None:
    """A class name says one thing across the package: two classes of one name (the log's
    verdict and the policy's, the ACP connection and the MCP one) are one concept or two
    names."""
    where: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(name)
    assert {cls: mods for cls, mods in where.items() if len(mods) > 1} == {}


def test_the_models_context_window_is_not_called_a_window() -> None:
    """ "window" is an editor's connection; what a model's request must fit in is its
    "context window", in module, class and function names alike."""
    names = set(MODULES)
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
    assert not [n for n in names if "model_window" in n.lower() or n == "known_window"]
    assert "trellisd.context_windows" in MODULES


def test_the_records_live_in_one_module() -> None:
    """The domain records are ``trellisd.records``; no second module re-exports them."""
    assert "trellisd.store.records" not in MODULES


@pytest.mark.parametrize("name", sorted(m for m in MODULES if m.startswith("trellisd.acp")))
def test_acp_is_an_adapter_that_does_not_import_the_native_server(name: str) -> None:
    """ACP windows join the daemon through the hub, never through the pygls module."""
    assert not {m for m in _imports(name) if m.startswith(("trellisd.server", "trellisd.handlers"))}


@pytest.mark.parametrize("name", ["trellisd.hub", "trellisd.server", "trellisd.shared"])
def test_only_the_process_edge_ends_the_process(name: str) -> None:
    """The daemon and its hub end the process through the function they are given, so they
    run in a test; ``os._exit`` is the edge's (``edge``, and ``forward``'s own process)."""
    source = MODULES[name].read_text(encoding="utf-8")
    assert "os._exit" not in source and "sys.exit" not in source


@pytest.mark.parametrize("name", sorted(m for m in MODULES if m.startswith("trellisd.acp")))
def test_acp_reaches_the_store_only_through_the_services(name: str) -> None:
    """If an ACP method needs the store, a service is missing."""
    assert not {m for m in _imports(name) if m.startswith("trellisd.store")}
    assert ".store." not in MODULES[name].read_text(encoding="utf-8")
