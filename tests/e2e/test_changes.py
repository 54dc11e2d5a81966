"""Change sets are tested in process (``tests/inprocess/test_changes.py``). acp_e2e imports the
policy it opens sessions with from here."""

from __future__ import annotations

from tests.fixtures.driver import OPEN

__all__ = ["OPEN"]
