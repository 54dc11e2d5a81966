"""When a failed model call is sent again, and after how long.

A call is retried on HTTP 408, 429 and 5xx, on a connection that was reset or closed before
the provider answered, and on a refused connection (at most ``connect_retries`` times, so a
host that is down is reported within a second or so). Nothing else is retried: a request the
provider rejected will be rejected again, and a stall has already cost a read timeout.

The wait is the provider's ``Retry-After`` when it sent one, else a capped exponential backoff
with jitter. No retry starts once ``max_retries`` retries were made or when the wait would end
past ``retry_budget`` seconds after the first attempt.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import httpx

RETRY_STATUSES = frozenset({408, 429})


def retryable_status(status: int) -> bool:
    return status in RETRY_STATUSES or 500 <= status <= 599


def retry_after(headers: httpx.Headers, now: float | None = None) -> float | None:
    """Seconds the provider asked to wait: ``retry-after-ms``, else ``Retry-After`` as
    seconds or an HTTP date; None when absent or unreadable."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff with "equal jitter": the n-th wait lies between half of
    and all of ``min(cap, base * 2 ** (n - 1))``."""

    base: float = 0.5
    cap: float = 8.0

    def delay(self, retry: int) -> float:
        ceiling = min(self.cap, self.base * 2 ** max(0, retry - 1))
        return random.uniform(ceiling / 2, ceiling)
