"""Rules: an approval that covers a family of commands instead of one command line.

A rule is an argv prefix pattern: the program (``argv[0]`` as written) and its fixed leading
words, then ``**``, any further arguments (zero or more). ``proposed_rule`` says which rule a
person may save when asked about a command: ``pytest -k a`` gives ``("pytest", "**")``,
``npm run test -- --watch`` gives ``("npm", "run", "test", "**")``, ``make test`` gives
``("make", "test")`` (make's targets are fixed words, and its further words are targets or
variables that may replace any recipe, so its rule has no ``**``).

A program with subcommands (``SUBCOMMANDS``) gets its subcommand, and ``run <script>``'s
script; a program that runs a command it is given (``WRAPPERS``: ``uv run``, ``poetry run``,
``bundle exec``...) gets the rule of that command after its words. An option before the
subcommand, the script or the wrapped command leaves nothing to fix the rule on: none.

None is proposed for a command that runs other programs or code given to it (``RUNNERS``,
each entry with why): a rule covering its further arguments would cover any program. Matching
is on argv words, never on a command line, and ``rule_covers`` asks ``proposed_rule`` of the
command itself too, so a rule for ``git`` never covers ``git -c core.pager=... log`` and a rule
for ``find`` never covers ``find . -exec ...``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..tools.base import Action

Rule = tuple[str, ...]
Grant = Action | Rule
"""What an "allow always" answer leaves: an exact action (its kind and target), or a rule."""
GrantKind = Literal["read", "write", "exec", "rule"]
ANY = "**"
"""A rule's last word that stands for any further arguments, zero or more."""


@dataclass(frozen=True)
class Runner:
    """A command that runs other programs or code given to it: ``program`` (its name without
    folder or version: ``python3.12`` is ``python``), then ``words`` (a subcommand), then, if
    set, ``option`` (an option or word that gives it the code to run) found ``where``: the
    first argument after the words (``first``) or any of them (``any``). No option: the
    program (or its subcommand) itself."""

    program: str
    words: tuple[str, ...]
    option: str | None
    why: str
    where: Literal["first", "any"] = "any"
    unless: frozenset[str] = frozenset()
    """Words that, right after the option, make it no runner (``python -m pytest``)."""

    @property
    def name(self) -> str:
        return " ".join(
            (self.program, *self.words, *(() if self.option is None else (self.option,)))
        )

    def matches(self, name: str, args: Sequence[str]) -> bool:
        if name != self.program or tuple(args[: len(self.words)]) != self.words:
            return False
        if self.option is None:
            return True
        rest = args[len(self.words) :]
        looked = rest[:1] if self.where == "first" else rest
        for at, arg in enumerate(looked):
            if arg == self.option and rest[at + 1 : at + 2] and rest[at + 1] in self.unless:
                continue
            if _is_option(arg, self.option):
                return True
        return False


def _is_option(arg: str, option: str) -> bool:
    """Whether ``arg`` gives ``option``: as written; a long one (``--exec``, go's and find's
    ``-toolexec``) with one dash or two and maybe ``=value``; a short one (``-c``) with its
    value attached (``-xmake``) or in a cluster of short options (``-Bc``)."""
    if arg == option:
        return True
    if not arg.startswith("-") or not option.startswith("-"):
        return False
    if len(option) > 2:
        word = option.lstrip("-")
        return arg.lstrip("-") == word or arg.lstrip("-").startswith(word + "=")
    if arg.startswith(option):
        return True  # its value attached: ``-xmake``
    cluster = arg[1:]  # short options together, ``-Bc``: letters only (not ``-DFOO_BAR=1``)
    return not arg.startswith("--") and cluster.isalpha() and option[1] in cluster


KNOWN_MODULES = frozenset(
    {
        "pytest",
        "unittest",
        "doctest",
        "mypy",
        "ruff",
        "black",
        "isort",
        "flake8",
        "pylint",
        "pip",
        "venv",
        "build",
        "twine",
        "nox",
        "json.tool",
        "compileall",
        "py_compile",
        "pyright",
    }
)
"""``python -m`` modules that run the project's own tests, checks or builds, given a rule."""

SHELL = "a shell: runs any command line it is given"
INTERPRETER = "runs the code given on its command line"
WRAPPER = "runs the program named in its arguments"
FETCHES = "fetches a package and runs it"

RUNNERS: tuple[Runner, ...] = (
    *(
        Runner(shell, (), None, SHELL)
        for shell in (
            "sh",
            "bash",
            "zsh",
            "dash",
            "fish",
            "ksh",
            "mksh",
            "ash",
            "csh",
            "tcsh",
            "pwsh",
            "nu",
            "xonsh",
            "elvish",
        )
    ),
    Runner("python", (), "-c", INTERPRETER, "first"),
    Runner(
        "python",
        (),
        "-m",
        "runs the module named, unless it is one of the known tools",
        "first",
        KNOWN_MODULES,
    ),
    Runner("node", (), "-e", INTERPRETER, "first"),
    Runner("node", (), "--eval", INTERPRETER, "first"),
    Runner("node", (), "-p", INTERPRETER, "first"),
    Runner("node", (), "--print", INTERPRETER, "first"),
    Runner("node", (), "-r", "loads the module named before the script", "first"),
    Runner("perl", (), "-e", INTERPRETER, "first"),
    Runner("perl", (), "-E", INTERPRETER, "first"),
    Runner("ruby", (), "-e", INTERPRETER, "first"),
    Runner("php", (), "-r", INTERPRETER, "first"),
    Runner("lua", (), "-e", INTERPRETER, "first"),
    Runner("Rscript", (), "-e", INTERPRETER, "first"),
    Runner("deno", ("eval",), None, INTERPRETER),
    Runner("bun", (), "-e", INTERPRETER, "first"),
    Runner("bun", (), "--eval", INTERPRETER, "first"),
    Runner("bun", ("x",), None, FETCHES),
    Runner("bunx", (), None, FETCHES),
    Runner("npx", (), None, FETCHES),
    Runner("npm", ("exec",), None, FETCHES),
    Runner("npm", ("x",), None, FETCHES),
    Runner("npm", ("init",), None, "runs the create-* package named, fetched as npx does"),
    Runner("npm", ("explore",), None, "runs a command in a package's folder"),
    Runner("pnpm", ("dlx",), None, FETCHES),
    Runner("pnpm", ("exec",), None, WRAPPER),
    Runner("yarn", ("dlx",), None, FETCHES),
    Runner("yarn", ("exec",), None, WRAPPER),
    Runner("uvx", (), None, FETCHES),
    Runner("uv", ("tool", "run"), None, FETCHES),
    Runner("pipx", ("run",), None, FETCHES),
    Runner("env", (), None, WRAPPER),
    Runner("xargs", (), None, "runs the program named with arguments read from its input"),
    Runner("find", (), "-exec", WRAPPER),
    Runner("find", (), "-execdir", WRAPPER),
    Runner("find", (), "-ok", WRAPPER),
    Runner("find", (), "-okdir", WRAPPER),
    Runner(
        "git",
        (),
        "-c",
        "sets any configuration (core.pager, core.sshCommand, an alias) that runs a program",
        "first",
    ),
    Runner("git", (), "--config-env", "sets configuration that runs a program", "first"),
    Runner("git", (), "--exec-path", "runs its subcommands from the folder named", "first"),
    Runner(
        "git",
        ("config",),
        None,
        "sets configuration that later runs programs (core.fsmonitor, core.pager, aliases)",
    ),
    Runner("git", ("rebase",), "-x", "runs the command given after each commit"),
    Runner("git", ("rebase",), "--exec", "runs the command given after each commit"),
    Runner("git", ("bisect", "run"), None, WRAPPER),
    Runner("git", ("submodule", "foreach"), None, "runs the command given in each submodule"),
    Runner("git", ("filter-branch",), None, "runs the shell commands given on each commit"),
    Runner("git", ("difftool",), "-x", "runs the diff program given"),
    Runner("git", ("difftool",), "--extcmd", "runs the diff program given"),
    Runner("git", ("grep",), "-O", "runs the pager given on the files found"),
    Runner("git", ("grep",), "--open-files-in-pager", "runs the pager given on the files found"),
    Runner("git", ("clone",), "-c", "sets configuration that runs a program"),
    Runner("git", ("clone",), "--config", "sets configuration that runs a program"),
    Runner("git", ("clone",), "-u", "runs the upload-pack program given"),
    Runner("git", ("clone",), "--upload-pack", "runs the upload-pack program given"),
    Runner("git", ("fetch",), "--upload-pack", "runs the upload-pack program given"),
    Runner("git", ("pull",), "--upload-pack", "runs the upload-pack program given"),
    Runner("git", ("ls-remote",), "--upload-pack", "runs the upload-pack program given"),
    Runner("git", ("push",), "--receive-pack", "runs the receive-pack program given"),
    Runner("git", ("push",), "--exec", "runs the receive-pack program given"),
    Runner("git", ("archive",), "--exec", "runs the upload-archive program given"),
    Runner("go", ("run",), None, "runs the package named, fetched when it names a version"),
    Runner("go", ("build",), "-toolexec", WRAPPER),
    Runner("go", ("test",), "-exec", WRAPPER),
    Runner("go", ("test",), "-toolexec", WRAPPER),
    Runner("go", ("vet",), "-vettool", WRAPPER),
    Runner("go", ("env",), "-w", "sets GOFLAGS (-toolexec) that later runs programs"),
    Runner("cargo", (), "--config", "sets configuration (a runner, a linker) that runs a program"),
    Runner("make", (), "--eval", "evaluates the makefile text given"),
    Runner("make", (), "-E", "evaluates the makefile text given"),
    Runner("make", (), "VAR=value", "a variable given may replace any recipe's commands"),
    Runner("docker", ("run",), None, "runs any image with any command"),
    Runner("docker", ("exec",), None, "runs any command in a container"),
    Runner("docker", ("compose", "run"), None, "runs any command in a service's container"),
    Runner("docker", ("compose", "exec"), None, "runs any command in a service's container"),
    Runner("docker", ("container", "run"), None, "runs any image with any command"),
    Runner("docker", ("container", "exec"), None, "runs any command in a container"),
    Runner("docker-compose", ("run",), None, "runs any command in a service's container"),
    Runner("docker-compose", ("exec",), None, "runs any command in a service's container"),
    Runner("podman", ("run",), None, "runs any image with any command"),
    Runner("podman", ("exec",), None, "runs any command in a container"),
    Runner("kubectl", ("exec",), None, "runs any command in a pod"),
    Runner("kubectl", ("run",), None, "runs any image in the cluster"),
    Runner("kubectl", ("debug",), None, "runs any image with any command in the cluster"),
    Runner("sudo", (), None, WRAPPER),
    Runner("doas", (), None, WRAPPER),
    Runner("su", (), None, "runs a shell or the command given as another user"),
    Runner("pkexec", (), None, WRAPPER),
    Runner("ssh", (), None, "runs the command given on another machine"),
    Runner("nohup", (), None, WRAPPER),
    Runner("timeout", (), None, WRAPPER),
    Runner("nice", (), None, WRAPPER),
    Runner("ionice", (), None, WRAPPER),
    Runner("stdbuf", (), None, WRAPPER),
    Runner("time", (), None, WRAPPER),
    Runner("watch", (), None, "runs the command line given, through a shell"),
    Runner("setsid", (), None, WRAPPER),
    Runner("chroot", (), None, WRAPPER),
    Runner("unshare", (), None, WRAPPER),
    Runner("nsenter", (), None, WRAPPER),
    Runner("flock", (), None, WRAPPER),
    Runner("taskset", (), None, WRAPPER),
    Runner("chrt", (), None, WRAPPER),
    Runner("strace", (), None, WRAPPER),
    Runner("ltrace", (), None, WRAPPER),
    Runner("gdb", (), None, "runs the program named and the commands given"),
    Runner("valgrind", (), None, WRAPPER),
    Runner("busybox", (), None, "each of its applets, a shell among them"),
    Runner("parallel", (), None, "runs the command lines given"),
    Runner("script", (), None, "runs a shell or the command given"),
    Runner("expect", (), None, "runs the Tcl script given"),
    Runner("tmux", (), None, "runs the commands given in new windows"),
    Runner("screen", (), None, WRAPPER),
    Runner("awk", (), None, "its program runs commands (system(), pipes)"),
    Runner("gawk", (), None, "its program runs commands (system(), pipes)"),
    Runner("mawk", (), None, "its program runs commands (system(), pipes)"),
    Runner("nawk", (), None, "its program runs commands (system(), pipes)"),
    Runner("sed", (), None, "its script's e command runs commands"),
    *(
        Runner(name, (), None, "runs the commands given in its script or on its command line")
        for name in ("ed", "ex", "vi", "vim", "nvim", "emacs", "dc", "m4", "gnuplot")
    ),
    *(
        Runner(name, (), None, "its commands run a shell command (.shell, \\!, system)")
        for name in ("sqlite3", "psql", "mysql")
    ),
    *(
        Runner(name, (), None, "a pager: runs a command given (!, -P, LESSOPEN)")
        for name in ("less", "more", "man")
    ),
    Runner("R", (), "-e", INTERPRETER, "first"),
    Runner("julia", (), "-e", INTERPRETER, "first"),
    Runner("luajit", (), "-e", INTERPRETER, "first"),
    Runner("osascript", (), "-e", INTERPRETER, "first"),
    Runner("bun", ("exec",), None, "runs the shell script given"),
    Runner("bun", ("create",), None, FETCHES),
    Runner("deno", ("repl",), None, INTERPRETER),
    Runner("deno", ("x",), None, FETCHES),
    Runner("yarn", ("node",), None, "runs node with the arguments given (-e)"),
    Runner("npm", (), "--script-shell", "runs the scripts with the program given"),
    Runner("npm", ("config",), None, "sets configuration (script-shell) that runs a program"),
    Runner("npm", ("set",), None, "sets configuration (script-shell) that runs a program"),
    Runner("pnpm", ("config",), None, "sets configuration that runs a program"),
    Runner("yarn", ("config",), None, "sets configuration that runs a program"),
    Runner("git", ("clone",), "--template", "copies hooks from the folder given, which run"),
    Runner("git", ("init",), "--template", "copies hooks from the folder given, which run"),
    Runner("git", ("send-email",), None, "runs the programs given (--smtp-server, --to-cmd)"),
    Runner("coverage", ("run",), None, "runs the script or module given"),
    Runner("rustup", ("run",), None, WRAPPER),
    Runner("rustc", (), "-C", "sets the linker (and other programs) it runs"),
    *(Runner(cc, (), "-wrapper", WRAPPER) for cc in ("gcc", "cc", "c++")),
    Runner("cmake", (), "-E", "runs the commands given (env, chdir, ...)"),
    Runner("cmake", (), "-P", "runs the script given"),
    Runner("mvn", (), "-D", "a property given may name a program to run (exec.executable)"),
    Runner("gradle", (), "-I", "runs the init script given"),
    Runner("gradle", (), "--init-script", "runs the init script given"),
    Runner("just", (), "VAR=value", "a variable given may change any recipe's commands"),
    Runner("just", (), "--shell", "runs the recipes with the program given"),
    Runner("just", (), "--command", WRAPPER),
    Runner("tar", (), "--to-command", WRAPPER),
    Runner("tar", (), "-I", WRAPPER),
    Runner("tar", (), "--use-compress-program", WRAPPER),
    Runner("tar", (), "--checkpoint-action", "its exec= action runs the command given"),
    Runner("tar", (), "-F", "runs the volume script given"),
    Runner("tar", (), "--info-script", "runs the volume script given"),
    Runner("tar", (), "--new-volume-script", "runs the volume script given"),
    Runner("zip", (), "-TT", "runs the test command given"),
    Runner("zip", (), "--unzip-command", "runs the test command given"),
    Runner("rsync", (), "-e", "runs the remote shell given"),
    Runner("rsync", (), "--rsh", "runs the remote shell given"),
    Runner("rsync", (), "--rsync-path", "runs the program given on the other side"),
    Runner("scp", (), None, "runs the programs given (-S, -o ProxyCommand)"),
    Runner("sftp", (), None, "runs the programs given (-S, -o ProxyCommand)"),
    *(
        Runner(name, (), None, "runs the command given on a connection (-e, -c, exec:)")
        for name in ("nc", "ncat", "netcat", "socat")
    ),
    *(
        Runner(name, (), None, "runs the commands given later (scheduled)")
        for name in ("at", "batch", "crontab")
    ),
    *(
        Runner(name, (), None, WRAPPER)
        for name in (
            "systemd-run",
            "runuser",
            "sg",
            "setpriv",
            "capsh",
            "prlimit",
            "numactl",
            "firejail",
            "bwrap",
            "proot",
            "fakeroot",
            "faketime",
            "torsocks",
            "proxychains",
            "dbus-run-session",
            "dbus-launch",
            "ssh-agent",
            "xvfb-run",
            "hyperfine",
            "entr",
            "perf",
            "rr",
            "catchsegv",
        )
    ),
)
"""Commands for which no rule is proposed, with why; ``protocol/plans.md`` lists them."""

INTERPRETERS = frozenset(
    {
        "python",
        "pypy",
        "node",
        "perl",
        "ruby",
        "php",
        "lua",
        "luajit",
        "Rscript",
        "tclsh",
        "julia",
        "bun",
        "R",
        "java",
    }
)
"""Programs whose first argument is the script they run (or an option): a rule fixes the
script (``python tools/gen.py``) or, for python, ``-m`` and a known module."""

SUBCOMMANDS = frozenset(
    {
        "git",
        "npm",
        "pnpm",
        "yarn",
        "cargo",
        "go",
        "uv",
        "poetry",
        "pip",
        "pipenv",
        "pdm",
        "hatch",
        "conda",
        "docker",
        "podman",
        "kubectl",
        "helm",
        "dotnet",
        "bundle",
        "gem",
        "rustup",
        "deno",
        "gh",
        "terraform",
        "mvn",
        "gradle",
        "swift",
        "composer",
        "mix",
        "stack",
        "cabal",
        "dune",
        "zig",
        "flutter",
        "dart",
        "pipx",
        "coverage",
    }
)
"""Programs whose first word chooses what they do: a rule fixes it (``git status``)."""

TARGETED = frozenset({"make", "just"})
"""Programs whose words are targets (recipes) or variables: a rule fixes every word, with no
``**`` (a further word may be a target the person never saw, or a variable that replaces a
recipe's commands)."""

BUN_SUBCOMMANDS = frozenset({"run", "test", "install", "add", "build", "remove", "update"})
"""``bun``'s own subcommands; any other first word is the script it runs."""

NESTED = frozenset(
    {
        ("git", "stash"),
        ("git", "remote"),
        ("git", "submodule"),
        ("git", "worktree"),
        ("git", "notes"),
        ("git", "bisect"),
        ("docker", "compose"),
        ("docker", "container"),
        ("docker", "image"),
        ("docker", "volume"),
        ("docker", "network"),
        ("podman", "container"),
        ("podman", "image"),
        ("kubectl", "config"),
        ("uv", "pip"),
        ("uv", "tool"),
        ("conda", "env"),
        ("gh", "pr"),
        ("gh", "issue"),
        ("gh", "repo"),
        ("gh", "release"),
        ("dotnet", "tool"),
    }
)
"""Subcommands whose next word chooses again (``git stash list``, ``git stash drop``): a rule
fixes both."""

SCRIPTED = frozenset(
    {
        ("npm", "run"),
        ("npm", "run-script"),
        ("pnpm", "run"),
        ("yarn", "run"),
        ("bun", "run"),
        ("deno", "run"),
        ("dotnet", "exec"),
    }
)
"""Subcommands whose next word is the script they run (``npm run test``): fixed too."""

WRAPPERS = frozenset(
    {
        ("uv", "run"),
        ("poetry", "run"),
        ("pipenv", "run"),
        ("pdm", "run"),
        ("hatch", "run"),
        ("bundle", "exec"),
        ("conda", "run"),
    }
)
"""Subcommands that run the command that follows them: the rule goes on with that command's
own (``uv run pytest -k a``: ``("uv", "run", "pytest", "**")``)."""

INSTALLERS = frozenset(
    {
        ("npm", "install"),
        ("npm", "i"),
        ("npm", "add"),
        ("pnpm", "add"),
        ("pnpm", "install"),
        ("yarn", "add"),
        ("bun", "add"),
        ("bun", "install"),
        ("pip", "install"),
        ("pip", "wheel"),
        ("deno", "install"),
        ("bundle", "add"),
        ("composer", "require"),
        ("cargo", "add"),
        ("go", "get"),
        ("dotnet", "add"),
        ("uv", "add"),
        ("uv", "pip", "install"),
        ("poetry", "add"),
        ("cargo", "install"),
        ("gem", "install"),
        ("go", "install"),
        ("pipx", "install"),
    }
)
"""Subcommands that fetch the packages named and run their install scripts: a rule only for
the subcommand with options (what the project's manifest and lock file say); none when a
package is named, and a rule never covers one."""

_VERSIONED = re.compile(r"(?P<name>[A-Za-z][A-Za-z_-]*?)(?:\d+(?:\.\d+)*)?")


def program_name(word: str) -> str:
    """A program's name as the tables know it: no folder, no version (``/usr/bin/python3.12``
    is ``python``, ``nodejs`` is ``node``)."""
    base = word.rsplit("/", 1)[-1]
    found = None if base in _NAMED else _VERSIONED.fullmatch(base)  # ``m4`` is no ``m``
    name = base if found is None else found["name"]
    return ALIASES.get(name, name)


ALIASES = {"nodejs": "node", "gradlew": "gradle", "mvnw": "mvn", "g++": "c++"}
"""Other names of the same program, and the project's wrappers that run it (``./gradlew``)."""
_NAMED = frozenset(r.program for r in RUNNERS) | INTERPRETERS | SUBCOMMANDS | TARGETED


def runner(argv: Sequence[str]) -> Runner | None:
    """The entry of ``RUNNERS`` that says ``argv`` runs other programs or code, if any."""
    if not argv:
        return None
    name, args = program_name(argv[0]), argv[1:]
    if name in TARGETED and any(_assigns(arg) for arg in args):
        return next(r for r in RUNNERS if r.program == name and r.option == "VAR=value")
    return next((r for r in RUNNERS if r.matches(name, args)), None)


def _assigns(arg: str) -> bool:
    """``NAME=value``, as make reads a variable from its arguments."""
    name, equals, _ = arg.partition("=")
    return bool(equals) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name) is not None


def _option(word: str) -> bool:
    """An option, or a toolchain's ``+name`` (``cargo +nightly``), where a word is wanted."""
    return word.startswith(("-", "+"))


def proposed_rule(argv: Sequence[str]) -> Rule | None:
    """The rule a person may save instead of approving ``argv`` once, or None when none can
    be proposed: a command that runs other programs or code given to it (``RUNNERS``), or one
    whose words leave nothing fixed to hold a rule on."""
    if not argv or not argv[0] or runner(argv) is not None:
        return None
    rule = _proposed(argv[0], program_name(argv[0]), list(argv[1:]))
    if rule is None or ANY in rule[:-1] or not all(rule):
        return None  # a fixed word that is empty or reads as "any further arguments"
    return rule


def _proposed(program: str, name: str, args: list[str]) -> Rule | None:
    if name in TARGETED:
        if not args or any(_option(a) for a in args):
            return None  # the default target, or options among the targets
        return (program, *args)
    if name == "bun" and args and args[0] in BUN_SUBCOMMANDS:
        return _subcommand(program, name, args)
    if name in INTERPRETERS:
        return _script(program, name, args)
    if name in SUBCOMMANDS:
        return _subcommand(program, name, args)
    return (program, ANY)


def _script(program: str, name: str, args: list[str]) -> Rule | None:
    """An interpreter's rule: its script, or ``-m`` and a known module (python); None for
    anything else first (code given, an option, the code read from its input)."""
    if not args:
        return None
    if name in ("python", "pypy") and args[0] == "-m":
        if len(args) < 2 or args[1] not in KNOWN_MODULES:
            return None
        if args[1] in SUBCOMMANDS:  # ``python -m pip install``: as ``pip install``
            inner = proposed_rule(args[1:])
            return None if inner is None else (program, "-m", *inner)
        return (program, "-m", args[1], ANY)
    if _option(args[0]):
        return None
    return (program, args[0], ANY)


def _subcommand(program: str, name: str, args: list[str]) -> Rule | None:
    """The rule of a program with subcommands: its subcommand (and the next word of a
    ``NESTED`` one, the script of a ``SCRIPTED`` one, the command of a ``WRAPPERS`` one)."""
    depth = 2 if args and (name, args[0]) in NESTED else 1
    words = args[:depth]
    if len(words) < depth or any(_option(w) for w in words):
        return None  # no subcommand, or an option before it
    key, rest = (name, *words), args[depth:]
    if key in INSTALLERS:
        return None if any(not _option(a) for a in rest) else (program, *words, ANY)
    if key in WRAPPERS:
        if not rest or _option(rest[0]):
            return None  # an option before the command: nothing fixed to hold a rule on
        inner = proposed_rule(rest)
        return None if inner is None else (program, *words, *inner)
    if key in SCRIPTED:
        if not rest or _option(rest[0]):
            return None
        return (program, *words, rest[0], ANY)
    return (program, *words, ANY)


def rule_covers(rule: Sequence[str], argv: Sequence[str]) -> bool:
    """Whether a saved ``rule`` allows ``argv``: its words begin ``argv`` (a last ``**``
    stands for any further arguments; without it, exactly those words), and a rule could be
    proposed for ``argv`` itself (a rule for ``git`` never covers ``git -c x log``)."""
    if not rule:
        return False
    if rule[-1] == ANY:
        fixed = tuple(rule[:-1])
        matched = tuple(argv[: len(fixed)]) == fixed
    else:
        matched = tuple(argv) == tuple(rule)
    return matched and proposed_rule(argv) is not None


def rule_target(rule: Sequence[str]) -> str:
    """A rule as a grant's ``target``: a compact JSON array (``["pytest","**"]``)."""
    return json.dumps(list(rule), separators=(",", ":"), ensure_ascii=False)


def rule_of(target: str) -> Rule | None:
    """The rule a grant's ``target`` holds; None when it is not a JSON array of non-empty
    strings with the program first (not ``**``)."""
    try:
        value = json.loads(target)
    except ValueError:
        return None
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(word, str) and word for word in value) or value[0] == ANY:
        return None
    return tuple(value)


def grant_of(kind: str, target: str) -> Grant | None:
    """A grant as the store and the wire name it: a rule (kind ``rule``, its JSON target),
    else an exact action; None for a rule whose target is not one."""
    if kind == "rule":
        return rule_of(target)
    return Action("write" if kind == "write" else "exec" if kind == "exec" else "read", target)


def grant_key(grant: Grant) -> tuple[GrantKind, str]:
    """A grant's kind and target, as the store keeps it and the wire lists it."""
    if isinstance(grant, Action):
        return grant.kind, grant.target
    return "rule", rule_target(grant)


def grant_wire(grant: Grant) -> dict[str, object]:
    """A grant as ``session/policy`` lists it (without its scope)."""
    kind, target = grant_key(grant)
    return (
        {"kind": kind, "target": target}
        if isinstance(grant, Action)
        else {
            "kind": kind,
            "target": target,
            "rule": list(grant),
        }
    )


def described(grant: Grant) -> str:
    """A grant in words, for a message: ``exec make test``, ``rule ["pytest","**"]``."""
    return " ".join(grant_key(grant))
