"""How long an editor window waits for trellisd, and what the windows cost in memory.

    python tests/bench/bench_attach.py [--runs 20] [--windows 10] [--codex PREFIX]

Figures, in milliseconds from spawning the command to the answer to ``initialize``:
- attach: ``trellisd`` (this checkout's console script, else ``python -m trellisd``) attaching
  to the store's shared daemon, which is already running;
- standalone: ``trellisd --standalone``, a daemon of its own started for the window;
- codex: ``codex app-server`` answering ``initialize``, when @openai/codex is installed under
  ``--codex`` (``npm install --prefix PREFIX @openai/codex``; default ``$CODEX_PREFIX`` or
  ``/tmp/codex``).
Then the resident memory (RSS) of one forwarder, and of the shared daemon with ``--windows``
windows attached.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INITIALIZE = {"processId": None, "rootUri": None, "capabilities": {}}


def frame(message: dict[str, object]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


async def read_frame(stream: asyncio.StreamReader) -> dict[str, object]:
    length = 0
    while (line := await stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    if not length:
        raise SystemExit("the window ended before it answered initialize")
    message: dict[str, object] = json.loads(await stream.readexactly(length))
    return message


class Window:
    """One ``trellisd`` process as an editor starts it."""

    def __init__(self, process: asyncio.subprocess.Process, answer: dict[str, object]) -> None:
        self.process, self.answer = process, answer

    @classmethod
    async def open(cls, command: list[str], env: dict[str, str]) -> tuple[Window, float]:
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
        )
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                   "params": INITIALIZE}))  # fmt: skip
        answer = await read_frame(process.stdout)
        return cls(process, answer), time.perf_counter() - started

    def daemon_pid(self) -> int:
        result = self.answer["result"]
        return int(result["capabilities"]["experimental"]["trellisd"]["daemon"]["pid"])  # type: ignore[index]

    async def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
        await read_frame(self.process.stdout)
        self.process.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
        await self.process.wait()


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def trellisd_command() -> list[str]:
    script = Path(sys.executable).parent / "trellisd"
    return [str(script)] if script.exists() else [sys.executable, "-m", "trellisd"]


async def codex_initialize(prefix: Path, runs: int) -> list[float] | None:
    binaries = sorted(prefix.glob("node_modules/@openai/codex*/vendor/*/bin/codex"))
    if not binaries:
        return None
    times = []
    with tempfile.TemporaryDirectory(prefix="bench-codex-") as scratch:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": scratch,
               "CODEX_HOME": scratch, "RUST_LOG": "error"}  # fmt: skip
        for _ in range(runs):
            started = time.perf_counter()
            process = await asyncio.create_subprocess_exec(
                str(binaries[0]), "app-server",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL, env=env,
            )  # fmt: skip
            assert process.stdin is not None and process.stdout is not None
            request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"clientInfo": {"name": "bench", "version": "1"}}}  # fmt: skip
            process.stdin.write(json.dumps(request).encode() + b"\n")
            await process.stdout.readline()
            times.append(time.perf_counter() - started)
            process.kill()
            await process.wait()
    return times


def report(name: str, seconds: list[float]) -> None:
    ms = [s * 1000 for s in seconds]
    print(
        f"{name:44} median {statistics.median(ms):7.1f} ms"
        f"   min {min(ms):7.1f}   max {max(ms):7.1f}   ({len(ms)} runs)"
    )


async def bench(runs: int, windows: int, codex: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-attach-", dir="/tmp") as scratch:
        env = {name: value for name, value in os.environ.items()
               if not name.startswith("TRELLISD_")}  # fmt: skip
        env.update(
            XDG_RUNTIME_DIR=scratch,
            TRELLISD_DB=str(Path(scratch) / "store.db"),
            TRELLISD_SHARED="1",
            PYTHONPATH=str(REPO / "daemon"),
        )
        command = trellisd_command()
        first, _ = await Window.open(command, env)  # starts the shared daemon
        daemon_pid = first.daemon_pid()
        attach = []
        for _ in range(runs):
            window, seconds = await Window.open(command, env)
            attach.append(seconds)
            await window.close()
        report(f"attach ({Path(command[0]).name}, daemon running)", attach)

        standalone = []
        for _ in range(max(3, runs // 4)):
            window, seconds = await Window.open([*command, "--standalone"], env)
            standalone.append(seconds)
            await window.close()
        report("standalone (a daemon of its own)", standalone)

        theirs = await codex_initialize(codex, max(3, runs // 4))
        if theirs is None:
            print(f"{'codex app-server':44} not found under {codex}")
        else:
            report("codex app-server", theirs)

        attached = [first]
        for _ in range(windows - 1):
            attached.append((await Window.open(command, env))[0])
        forwarder = statistics.median(rss_mib(w.process.pid) for w in attached)
        print(f"{'forwarder memory (RSS, median)':44} {forwarder:7.1f} MiB")
        print(
            f"{f'shared daemon memory, {windows} windows attached':44}"
            f" {rss_mib(daemon_pid):7.1f} MiB"
        )
        for window in attached:
            await window.close()
        os.kill(daemon_pid, signal.SIGTERM)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20, help="measured attaches (default 20)")
    p.add_argument("--windows", type=int, default=10, help="windows for the memory figure")
    p.add_argument("--codex", default=os.environ.get("CODEX_PREFIX", "/tmp/codex"))
    args = p.parse_args()
    if shutil.which("nproc"):
        print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print(
            "PYTHONDONTWRITEBYTECODE is set: every start compiles trellisd's modules from source,"
            " which an installed trellisd never does; unset it for the figure a user sees"
        )
    asyncio.run(bench(max(1, args.runs), max(1, args.windows), Path(args.codex)))


if __name__ == "__main__":
    main()
