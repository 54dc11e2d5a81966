"""Rules: the argv prefix pattern proposed for a command, none for a command that runs other
programs or code given to it (every entry of the table, one by one), what a saved rule covers,
and a rule among the policy's grants (a deny still wins, plan and never still refuse, a
protected path and an escalation still ask)."""

from __future__ import annotations

import shlex

import pytest

from trellisd.errors import InvalidParams
from trellisd.policy import Action, Layer, Policy
from trellisd.policy.rules import (
    RUNNERS,
    grant_of,
    proposed_rule,
    rule_covers,
    rule_of,
    rule_target,
    runner,
)

PROPOSED = [
    ("pytest -k a", ("pytest", "**")),
    ("pytest", ("pytest", "**")),
    ("npm run test -- --watch", ("npm", "run", "test", "**")),
    ("npm test", ("npm", "test", "**")),
    ("git status --short", ("git", "status", "**")),
    ("cargo test --release", ("cargo", "test", "**")),
    ("cargo run --release", ("cargo", "run", "**")),
    ("python -m pytest -q", ("python", "-m", "pytest", "**")),
    ("python3.12 -m mypy daemon", ("python3.12", "-m", "mypy", "**")),
    ("python tools/gen.py x", ("python", "tools/gen.py", "**")),
    ("/usr/bin/node build.js --prod", ("/usr/bin/node", "build.js", "**")),
    ("make test", ("make", "test")),
    ("make test lint", ("make", "test", "lint")),
    ("git stash list", ("git", "stash", "list", "**")),
    ("docker compose ps -a", ("docker", "compose", "ps", "**")),
    ("uv run pytest -k a", ("uv", "run", "pytest", "**")),
    ("poetry run python -m pytest", ("poetry", "run", "python", "-m", "pytest", "**")),
    ("bundle exec rspec spec/a_spec.rb", ("bundle", "exec", "rspec", "**")),
    ("deno run main.ts --port 1", ("deno", "run", "main.ts", "**")),
    ("bun test", ("bun", "test", "**")),
    ("bun run dev", ("bun", "run", "dev", "**")),
    ("bun scripts/seed.ts", ("bun", "scripts/seed.ts", "**")),
    ("npm install", ("npm", "install", "**")),
    ("npm ci", ("npm", "ci", "**")),
    ("go test ./...", ("go", "test", "**")),
    ("git rebase -i main", ("git", "rebase", "**")),
    ("git commit -m ''", ("git", "commit", "**")),
    ("find . -name '*.py'", ("find", "**")),
    ("ls -la", ("ls", "**")),
    ("./run-tests.sh --fast", ("./run-tests.sh", "**")),
    ("python -m pip list", ("python", "-m", "pip", "list", "**")),
    ("python -m pip install", ("python", "-m", "pip", "install", "**")),
    ("./gradlew test", ("./gradlew", "test", "**")),
    ("mvn test", ("mvn", "test", "**")),
    ("just test", ("just", "test")),
    ("java Main", ("java", "Main", "**")),
    ("dotnet exec out/app.dll x", ("dotnet", "exec", "out/app.dll", "**")),
    ("coverage report", ("coverage", "report", "**")),
    ("cmake -S . -B build -DCMAKE_BUILD_TYPE=Release", ("cmake", "**")),
    ("rsync -av a/ b/", ("rsync", "**")),
    ("tar -czf x.tar.gz src", ("tar", "**")),
]


@pytest.mark.parametrize(("line", "rule"), PROPOSED, ids=[line for line, _ in PROPOSED])
def test_a_command_gets_its_program_and_fixed_leading_words(
    line: str, rule: tuple[str, ...]
) -> None:
    assert proposed_rule(shlex.split(line)) == rule


NOTHING_FIXED = [
    "git",  # no subcommand: a rule would cover every one
    "git -C sub status",  # an option before the subcommand
    "git --no-pager log",
    "cargo +nightly test",
    "npm --prefix x test",
    "npm run",
    "npm run --silent test",
    "docker compose",
    "python",  # the code read from its input
    "python -",
    "python -B x.py",
    "python -m",
    "node",
    "node --inspect app.js",
    "make",  # the default target
    "make -j4 test",
    "uv run",
    "uv run --with x pytest",
    "npm install left-pad",  # a package named: fetched and its install scripts run
    "pip install -r requirements.txt",
    "uv pip install requests",
    "cargo install ripgrep",
    "uv run python -c 'print(1)'",  # the command it runs gets none
    "poetry run bash -c x",
    "python -m pip install -r requirements.txt",
    "python -m coverage run -m pip install evil",  # coverage is not a known module
    "java -jar x.jar",
    "cargo add serde",
    "go get example.com/x@latest",
    "npm run **",  # a fixed word that reads as any further arguments
    "",
]


@pytest.mark.parametrize("line", NOTHING_FIXED)
def test_none_when_the_words_leave_nothing_fixed(line: str) -> None:
    assert proposed_rule(shlex.split(line)) is None


RUNS = {
    "sh": "sh -c 'rm -rf x'",
    "bash": "/bin/bash script.sh",
    "zsh": "zsh -c ls",
    "dash": "dash",
    "fish": "fish -c ls",
    "ksh": "ksh x",
    "mksh": "mksh x",
    "ash": "ash x",
    "csh": "csh x",
    "tcsh": "tcsh x",
    "pwsh": "pwsh -Command ls",
    "nu": "nu -c ls",
    "xonsh": "xonsh -c ls",
    "elvish": "elvish -c ls",
    "python -c": "python3 -c 'import os'",
    "python -m": "python -m http.server",
    "node -e": "node -e 'process.exit()'",
    "node --eval": "node --eval=1",
    "node -p": "node -p 1",
    "node --print": "node --print 1",
    "node -r": "node -r ./hook.js app.js",
    "perl -e": "perl -e 'print 1'",
    "perl -E": "perl -E 'say 1'",
    "ruby -e": "ruby -e 'p 1'",
    "php -r": "php -r 'echo 1;'",
    "lua -e": "lua5.4 -e 'print(1)'",
    "Rscript -e": "Rscript -e 'q()'",
    "deno eval": "deno eval 'console.log(1)'",
    "bun -e": "bun -e 'console.log(1)'",
    "bun --eval": "bun --eval 'console.log(1)'",
    "bun x": "bun x cowsay",
    "bunx": "bunx cowsay",
    "npx": "npx cowsay hi",
    "npm exec": "npm exec -- cowsay",
    "npm x": "npm x cowsay",
    "npm init": "npm init vite",
    "npm explore": "npm explore left-pad -- ls",
    "pnpm dlx": "pnpm dlx cowsay",
    "pnpm exec": "pnpm exec rm x",
    "yarn dlx": "yarn dlx cowsay",
    "yarn exec": "yarn exec rm x",
    "uvx": "uvx ruff check",
    "uv tool run": "uv tool run ruff",
    "pipx run": "pipx run cowsay",
    "env": "env FOO=1 pytest",
    "xargs": "xargs rm",
    "find -exec": "find . -exec rm {} ;",
    "find -execdir": "find . -execdir rm {} +",
    "find -ok": "find . -ok rm {} ;",
    "find -okdir": "find . -okdir rm {} ;",
    "git -c": "git -c core.pager=sh log",
    "git --config-env": "git --config-env=core.pager=P log",
    "git --exec-path": "git --exec-path=/tmp/x status",
    "git config": "git config core.fsmonitor ./x",
    "git rebase -x": "git rebase -x 'make' main",
    "git rebase --exec": "git rebase --exec=make main",
    "git bisect run": "git bisect run ./check.sh",
    "git submodule foreach": "git submodule foreach rm -rf x",
    "git filter-branch": "git filter-branch --tree-filter 'rm x'",
    "git difftool -x": "git difftool -xsh",
    "git difftool --extcmd": "git difftool --extcmd=sh",
    "git grep -O": "git grep -Osh foo",
    "git grep --open-files-in-pager": "git grep --open-files-in-pager=sh foo",
    "git clone -c": "git clone -c core.sshCommand=sh url",
    "git clone --config": "git clone --config=core.sshCommand=sh url",
    "git clone -u": "git clone -u sh url",
    "git clone --upload-pack": "git clone --upload-pack sh url",
    "git fetch --upload-pack": "git fetch --upload-pack=sh",
    "git pull --upload-pack": "git pull --upload-pack=sh",
    "git ls-remote --upload-pack": "git ls-remote --upload-pack=sh url",
    "git push --receive-pack": "git push --receive-pack=sh",
    "git push --exec": "git push --exec=sh",
    "git archive --exec": "git archive --exec=sh --remote=x HEAD",
    "go run": "go run ./cmd/tool",
    "go build -toolexec": "go build -toolexec=sh ./...",
    "go test -exec": "go test -exec sh ./...",
    "go test -toolexec": "go test --toolexec sh ./...",
    "go vet -vettool": "go vet -vettool=./x ./...",
    "go env -w": "go env -w GOFLAGS=-toolexec=sh",
    "cargo --config": "cargo test --config 'target.x.runner=\"sh\"'",
    "make --eval": "make --eval='x: ; sh' x",
    "make -E": "make -E 'x: ; sh' x",
    "make VAR=value": "make test CC=sh",
    "docker run": "docker run alpine sh",
    "docker exec": "docker exec box sh",
    "docker compose run": "docker compose run web sh",
    "docker compose exec": "docker compose exec web sh",
    "docker container run": "docker container run alpine sh",
    "docker container exec": "docker container exec box sh",
    "docker-compose run": "docker-compose run web sh",
    "docker-compose exec": "docker-compose exec web sh",
    "podman run": "podman run alpine sh",
    "podman exec": "podman exec box sh",
    "kubectl exec": "kubectl exec pod -- sh",
    "kubectl run": "kubectl run x --image=alpine",
    "kubectl debug": "kubectl debug pod -it --image=alpine",
    "sudo": "sudo ls",
    "doas": "doas ls",
    "su": "su -c ls",
    "pkexec": "pkexec ls",
    "ssh": "ssh host ls",
    "nohup": "nohup pytest",
    "timeout": "timeout 5 sh",
    "nice": "nice -n 5 sh",
    "ionice": "ionice -c 3 sh",
    "stdbuf": "stdbuf -oL sh",
    "time": "/usr/bin/time sh",
    "watch": "watch 'rm x'",
    "setsid": "setsid sh",
    "chroot": "chroot / sh",
    "unshare": "unshare -r sh",
    "nsenter": "nsenter -t 1 sh",
    "flock": "flock /tmp/l sh",
    "taskset": "taskset 1 sh",
    "chrt": "chrt 1 sh",
    "strace": "strace sh",
    "ltrace": "ltrace sh",
    "gdb": "gdb -ex run --args sh",
    "valgrind": "valgrind sh",
    "busybox": "busybox sh",
    "parallel": "parallel rm ::: x",
    "script": "script -c sh",
    "expect": "expect -c 'spawn sh'",
    "tmux": "tmux new sh",
    "screen": "screen sh",
    "awk": "awk 'BEGIN { system(\"sh\") }'",
    "gawk": "gawk 'BEGIN { system(\"sh\") }'",
    "mawk": "mawk 'BEGIN { system(\"sh\") }'",
    "nawk": "nawk 'BEGIN { system(\"sh\") }'",
    "sed": "sed -n '1e sh' x",
    "ed": "ed x",
    "ex": "ex -c '!sh' x",
    "vi": "vi -c '!sh'",
    "vim": "vim -c '!sh'",
    "nvim": "nvim --headless -c '!sh'",
    "emacs": "emacs --batch --eval '(shell-command \"sh\")'",
    "dc": "dc -e '!sh'",
    "m4": "m4 x.m4",
    "gnuplot": "gnuplot -e 'system(\"sh\")'",
    "sqlite3": "sqlite3 x.db '.shell sh'",
    "psql": "psql -c '\\! sh'",
    "mysql": "mysql -e 'system sh'",
    "less": "less x",
    "more": "more x",
    "man": "man -P sh ls",
    "R -e": "R -e 'system(\"sh\")'",
    "julia -e": "julia -e 'run(`sh`)'",
    "luajit -e": "luajit -e 'os.execute(\"sh\")'",
    "osascript -e": "osascript -e 'do shell script \"sh\"'",
    "bun exec": "bun exec 'rm x'",
    "bun create": "bun create vite",
    "deno repl": "deno repl --eval 'Deno.exit()'",
    "deno x": "deno x cowsay",
    "yarn node": "yarn node -e 1",
    "npm --script-shell": "npm test --script-shell=./x",
    "npm config": "npm config set script-shell ./x",
    "npm set": "npm set script-shell=./x",
    "pnpm config": "pnpm config set shell-emulator true",
    "yarn config": "yarn config set x y",
    "git clone --template": "git clone --template=./hooks url",
    "git init --template": "git init --template ./hooks",
    "git send-email": "git send-email --smtp-server=./x HEAD^",
    "coverage run": "coverage run -m pytest",
    "rustup run": "rustup run nightly sh",
    "rustc -C": "rustc -C linker=./x main.rs",
    "gcc -wrapper": "gcc -wrapper sh,-c main.c",
    "cc -wrapper": "cc -wrapper sh,-c main.c",
    "c++ -wrapper": "g++ -wrapper sh,-c main.cc",
    "cmake -E": "cmake -E env sh",
    "cmake -P": "cmake -P x.cmake",
    "mvn -D": "./mvnw exec:exec -Dexec.executable=sh",
    "gradle -I": "./gradlew -I x.gradle test",
    "gradle --init-script": "gradle test --init-script=x.gradle",
    "just VAR=value": "just x=1 test",
    "just --shell": "just --shell ./x test",
    "just --command": "just --command sh",
    "tar --to-command": "tar -x --to-command=sh -f x.tar",
    "tar -I": "tar -I ./x -cf x.tar .",
    "tar --use-compress-program": "tar --use-compress-program=./x -cf x.tar .",
    "tar --checkpoint-action": "tar --checkpoint=1 --checkpoint-action=exec=sh -cf x.tar .",
    "tar -F": "tar -F ./x -cf x.tar .",
    "tar --info-script": "tar --info-script=./x -cf x.tar .",
    "tar --new-volume-script": "tar --new-volume-script=./x -cf x.tar .",
    "zip -TT": "zip -T -TT ./x x.zip a",
    "zip --unzip-command": "zip -T --unzip-command=./x x.zip a",
    "rsync -e": "rsync -avze ./x a host:b",
    "rsync --rsh": "rsync --rsh=./x a host:b",
    "rsync --rsync-path": "rsync --rsync-path=./x a host:b",
    "scp": "scp -S ./x a host:b",
    "sftp": "sftp -S ./x host",
    "nc": "nc -e sh host 1",
    "ncat": "ncat --exec sh host 1",
    "netcat": "netcat -c sh host 1",
    "socat": "socat - EXEC:sh",
    "at": "at now -f x.sh",
    "batch": "batch -f x.sh",
    "crontab": "crontab x.cron",
    "systemd-run": "systemd-run --user sh",
    "runuser": "runuser -u x sh",
    "sg": "sg x sh",
    "setpriv": "setpriv sh",
    "capsh": "capsh -- -c sh",
    "prlimit": "prlimit --nofile=10 sh",
    "numactl": "numactl -C 0 sh",
    "firejail": "firejail sh",
    "bwrap": "bwrap --bind / / sh",
    "proot": "proot sh",
    "fakeroot": "fakeroot sh",
    "faketime": "faketime yesterday sh",
    "torsocks": "torsocks sh",
    "proxychains": "proxychains4 sh",
    "dbus-run-session": "dbus-run-session sh",
    "dbus-launch": "dbus-launch sh",
    "ssh-agent": "ssh-agent sh",
    "xvfb-run": "xvfb-run sh",
    "hyperfine": "hyperfine 'rm x'",
    "entr": "entr -s 'make'",
    "perf": "perf stat sh",
    "rr": "rr record sh",
    "catchsegv": "catchsegv sh",
}


def test_every_entry_of_the_table_has_its_case_here() -> None:
    assert list(RUNS) == [r.name for r in RUNNERS]


@pytest.mark.parametrize("name", list(RUNS))
def test_a_command_that_runs_others_or_code_gets_no_rule_and_no_rule_covers_it(
    name: str,
) -> None:
    argv = shlex.split(RUNS[name])
    found = runner(argv)
    assert found is not None and found.name == name
    assert proposed_rule(argv) is None
    # even a rule naming its program and every word of it does not cover it
    assert not rule_covers((argv[0], "**"), argv)
    assert not rule_covers(tuple(argv), argv)


@pytest.mark.parametrize(
    ("benign", "harmful"),
    [
        ("git log --oneline", "git -c core.pager=sh log"),
        ("find . -name x", "find . -name x -exec rm {} ;"),
        ("git rebase -i main", "git rebase -ix sh main"),
        ("go test ./...", "go test -exec=sh ./..."),
        ("python -m pytest -q", "python -m pydoc_data"),
        ("git grep foo", "git grep -nO sh foo"),
    ],
)
def test_a_rule_for_the_harmless_form_never_covers_the_harmful_one(
    benign: str, harmful: str
) -> None:
    rule = proposed_rule(shlex.split(benign))
    assert rule is not None and rule_covers(rule, shlex.split(benign))
    assert not rule_covers(rule, shlex.split(harmful))


def test_a_rule_covers_its_words_and_what_follows_and_nothing_else() -> None:
    pytest_rule = ("pytest", "**")
    assert rule_covers(pytest_rule, ["pytest"])
    assert rule_covers(pytest_rule, ["pytest", "-k", "a"])
    assert rule_covers(pytest_rule, ["pytest", "tests/x.py"])
    assert not rule_covers(pytest_rule, ["pytest-watch"])
    assert not rule_covers(pytest_rule, ["python", "-c", "import pytest"])
    assert not rule_covers(pytest_rule, ["/usr/bin/pytest"])  # argv[0] as written
    npm = ("npm", "run", "test", "**")
    assert rule_covers(npm, ["npm", "run", "test", "--", "--watch"])
    assert not rule_covers(npm, ["npm", "run", "deploy"])
    assert not rule_covers(npm, ["npm", "run-script", "test"])
    make = ("make", "test")  # without **: exactly those words
    assert rule_covers(make, ["make", "test"])
    assert not rule_covers(make, ["make", "test", "deploy"])
    assert not rule_covers(("make", "**"), ["make", "test", "CC=sh"])
    assert not rule_covers((), ["pytest"])


def test_a_rule_is_kept_as_compact_json_and_read_back_only_when_it_is_one() -> None:
    assert rule_target(("npm", "run", "test", "**")) == '["npm","run","test","**"]'
    assert rule_of('["npm","run","test","**"]') == ("npm", "run", "test", "**")
    for bad in ("pytest", "[]", '["**"]', '["pytest", ""]', '["pytest", 1]', "{}", "["):
        assert rule_of(bad) is None, bad
    assert grant_of("rule", '["pytest","**"]') == ("pytest", "**")
    assert grant_of("rule", "pytest") is None
    assert grant_of("exec", "make test") == Action("exec", "make test")


ALLOW_ALL = Layer("default", allow_read=("**",), allow_write=("**",), allow_exec=("*",))


def exec_of(line: str) -> Action:
    argv = tuple(shlex.split(line))
    return Action("exec", shlex.join(argv), argv=argv)


def test_a_rule_grant_turns_an_ask_into_a_run_for_the_commands_it_covers() -> None:
    policy = Policy((ALLOW_ALL,), "ask").with_grant(("pytest", "**"))
    assert policy.check(exec_of("pytest -k a")).ruling == "allow"
    assert policy.check(exec_of("pytest tests/x.py")).ruling == "allow"
    assert policy.check(exec_of("python -c 'import pytest'")).ruling == "ask"
    assert policy.check(exec_of("ls")).ruling == "ask"
    # an exec without its words (an MCP tool's call) is never covered by a rule
    assert policy.check(Action("exec", "pytest -k a")).ruling == "ask"
    # grants compare kind and target only
    assert Action("exec", "pytest", argv=("pytest",)) == Action("exec", "pytest")


def test_a_rule_never_lifts_a_deny_plan_never_a_protected_path_or_an_escalation() -> None:
    rule = ("pytest", "**")
    denying = Layer("project", deny_exec=("pytest --deselect*",))
    policy = Policy((ALLOW_ALL, denying), "ask").with_grant(rule)
    assert policy.check(exec_of("pytest --deselect x")).ruling == "refuse"
    assert policy.check(exec_of("pytest -q")).ruling == "allow"
    for mode in ("plan", "never"):
        assert Policy((ALLOW_ALL,), mode).with_grant(rule).check(exec_of("pytest")).ruling == (
            "refuse"
        )
    argv = ("pytest", "-q")
    way_out = Action("exec", shlex.join(argv), escalate=True, argv=argv)
    assert Policy((ALLOW_ALL,), "ask").with_grant(rule).check(way_out).ruling == "ask"
    # a rule never names a write: a protected path still asks
    protecting = Layer("hooks", allow_write=(".git/hooks/*",))
    written = Policy((ALLOW_ALL, protecting), "ask").with_grant(rule)
    assert written.check(Action("write", ".git/hooks/pre-commit")).ruling == "ask"


def test_the_read_back_lists_a_rule_with_its_words_and_a_session_open_may_give_one() -> None:
    kept = Policy((ALLOW_ALL,), "ask").with_kept(
        frozenset({("pytest", "**"), Action("exec", "make")}), frozenset({("git", "log", "**")})
    )
    git_log = {"kind": "rule", "target": '["git","log","**"]', "rule": ["git", "log", "**"]}
    tests = {"kind": "rule", "target": '["pytest","**"]', "rule": ["pytest", "**"]}
    assert kept.to_wire()["grants"] == [
        {"kind": "exec", "target": "make", "scope": "session"},
        {**git_log, "scope": "project"},
        {**tests, "scope": "session"},
    ]
    given = Policy.from_wire({"grants": [{"kind": "rule", "target": '["pytest","**"]'}]})
    assert given.grants == frozenset({("pytest", "**")})
    assert given.to_wire()["grants"][0]["scope"] == "policy"
    with pytest.raises(InvalidParams, match=r"policy\.grants\[0\]\.target must be a rule"):
        Policy.from_wire({"grants": [{"kind": "rule", "target": "pytest"}]})
