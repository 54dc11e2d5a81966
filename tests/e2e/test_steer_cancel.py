"""Steer and cancel are tested in process (``tests/inprocess/test_steer_cancel.py``). acp_e2e
imports its held replies from here."""

from __future__ import annotations

from tests.fixtures.driver import LONG, held_after, tokens

__all__ = ["LONG", "held_after", "tokens"]
