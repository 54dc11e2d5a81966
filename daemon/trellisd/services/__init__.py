"""The daemon's services, with no knowledge of the wire: sessions, turns and runs over the
async store. ``start`` builds the store and the services, in one place, at start-up.

    Services
    +-- sessions  SessionService   open, reopen, list, history, branch, take over, fork,
                                   rename, instruct, close, delete, the feed
                  +-- worktrees  WorktreeService  a session's own git worktree: made,
                                                  merged, discarded, pruned at start
    +-- turns     TurnService      run, resume, steer, cancel (with the loop's seams)
                  +-- policies  Policies  each session's policy, grants and approval mode
    +-- runs      RunService       a run's summary, steps and events
    +-- archive   ArchiveService   a session exported to a file, imported from one
    +-- changes   ChangeService    change sets, diffs, restoring and reverting files
    +-- tools     ToolService      the tools a session's model sees (built-in and MCP)
    +-- mcp       McpServers       each session's MCP servers (``mcp``)
    +-- budgets   BudgetService    a session's budget and spend
    +-- queues    PromptQueues     prompts queued behind a session's running turn
    +-- choices   ChoiceService    an ACP client's model and rejections of a session
    +-- plans     PlanService      a planned turn's plan run in a new turn
    +-- processes ProcessService   the processes a session's turns started (``start_process``)
    +-- hooks     HookService      the user's and the project's hooks, run at each event
    +-- commands  CommandService   the user's and the project's custom commands, run as turns
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from ..config import ProviderSettings
from ..config_file import Settings
from ..daemon_settings import DaemonSettings
from ..errors import TrellisError
from ..mcp import McpServers, McpServerSpec
from ..pricing import use_prices
from ..processes import pid_alive
from ..providers import make_provider
from ..providers.base import Provider
from ..store.facade import AsyncStore
from .approvals import ProjectApprovals
from .archive import ArchiveService
from .budgets import BudgetService
from .changes import Asker, ChangeService
from .choices import ChoiceService
from .commands import CommandService
from .hooks import HookService
from .plans import PlanService
from .policies import Policies
from .processes import ProcessService
from .queue import PromptQueues
from .running import Running
from .runs import RunService
from .seams import Notifier
from .sessions import SessionService
from .settings import Defaults
from .tools import ToolService
from .turns import TurnService

log = logging.getLogger(__name__)


class Services:
    def __init__(
        self,
        store: AsyncStore,
        settings: Settings | ProviderSettings,
        notifier: Notifier,
        providers: Callable[[ProviderSettings], Provider] = make_provider,
        mcp_config: Callable[[], Sequence[McpServerSpec]] | None = None,
        asker: Asker | None = None,
    ) -> None:
        self.store = store
        if isinstance(settings, ProviderSettings):
            settings = Settings(settings)
        self.settings = settings  # the daemon's own, read once at start-up
        daemon = settings.daemon
        use_prices(settings.prices, daemon.prices_file)
        self.defaults = Defaults(settings)
        self.running = Running()
        policies = self.policies = Policies(
            store, lambda: self.defaults.policy, (store.folder,), listener=notifier
        )
        if mcp_config is None:  # the config file's servers, as the window's settings have them

            def mcp_config() -> list[McpServerSpec]:
                return list(self.defaults.settings.mcp_servers)

        self.mcp = McpServers(
            store.mcp_approvals, mcp_config, daemon.mcp_timeout, daemon.search_path
        )
        self.processes = ProcessService(notifier)
        self.hooks = HookService(
            store,
            policies,
            store.mcp_approvals,
            lambda: self.defaults.settings.hooks,
            daemon.search_path,
        )
        self.approvals = ProjectApprovals(
            store, policies, store.mcp_approvals, self.hooks, self.mcp
        )
        self.changes = ChangeService(
            store, self.running, policies, store.folder / "git", asker, daemon.git_environment
        )
        self.sessions = SessionService(
            store,
            self.defaults,
            self.running,
            policies,
            self.changes,
            self.mcp,
            self.processes,
            self.hooks,
        )
        self.turns = TurnService(
            store,
            self.defaults,
            self.running,
            policies,
            notifier,
            providers,
            self.changes,
            self.mcp,
            daemon.max_steps,
            self.sessions.worktrees,
            self.processes,
            self.hooks,
        )
        self.tools = ToolService(store, policies, self.mcp)
        self.runs = RunService(store)
        self.archive = ArchiveService(store)
        self.budgets = BudgetService(store)
        self.choices = ChoiceService(store)
        self.queues = PromptQueues(self.running, notifier)
        self.plans = PlanService(store, policies, self.running)
        self.commands = CommandService(
            store, self.defaults, policies, self.turns, self.queues, daemon.commands_folder
        )
        self._heartbeat: asyncio.Task[None] | None = None
        self.closing: list[Callable[[], Awaitable[None]]] = []
        """What else to stop on a clean exit (a view server started on demand), newest first."""

    async def start(self) -> None:
        """Register this daemon as a writer, mark the turns of gone daemons interrupted,
        and keep the heartbeat that tells other daemons this one lives."""
        await self.store.leases.register()
        await self._mark_interrupted()
        await self.sessions.worktrees.recover()
        self._heartbeat = asyncio.ensure_future(self._beat())

    async def _mark_interrupted(self) -> None:
        stopped = await self.store.runs.mark_interrupted()
        if stopped:
            log.info("marked %d turn(s) interrupted: their daemon stopped mid-turn", len(stopped))

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.settings.daemon.heartbeat)
            try:
                await self.store.leases.heartbeat()
                await self._mark_interrupted()
            except TrellisError as exc:
                log.warning("heartbeat failed: %s", exc.message)

    async def close(self) -> None:
        """A clean exit: stop the heartbeat, close the providers' connections, release the
        leases, close the store."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
        while self.closing:
            await self.closing.pop()()
        await self.turns.close()
        await self.processes.close_all()
        await self.policies.loopbacks.close_all()
        await self.mcp.close_all()
        await self.store.close()


async def start(
    db_path: str | Path,
    settings: Settings | ProviderSettings,
    notifier: Notifier,
    providers: Callable[[ProviderSettings], Provider] = make_provider,
    mcp_config: Callable[[], Sequence[McpServerSpec]] | None = None,
    asker: Asker | None = None,
) -> Services:
    """Open the store at ``db_path`` and start the services over it (``StoreError`` if the
    store cannot be used). ``mcp_config`` gives the config file's MCP servers, asked each time
    a session's servers are first needed; ``asker`` is who is asked before a restore writes a
    protected path (without one, such paths are left as they are)."""
    daemon = settings.daemon if isinstance(settings, Settings) else DaemonSettings()
    # The logs are anchored in the user's folder, never the store's.
    store = await AsyncStore.open(db_path, pid_alive, daemon.config_folder, daemon.stale_seconds)
    services = Services(store, settings, notifier, providers, mcp_config, asker)
    await services.start()
    return services


__all__ = ["Notifier", "Services", "start"]
