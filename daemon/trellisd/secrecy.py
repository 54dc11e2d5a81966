"""Which variables of an environment hold secrets: the rule the model's programs are started
by (``tools.environment``) and a window's hello is scrubbed by (``rendezvous``).

Standard library only, and none of it: the forwarder an editor starts imports this.
"""

from __future__ import annotations

SECRET_PARTS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "COOKIE")
SECRET_WORDS = frozenset({"PASS", "PWD", "PAT", "DSN", "AUTH"})
NOT_SECRET = frozenset({"PWD"})  # the shell's current folder


def secret_variable(name: str, value: str) -> bool:
    """Whether a variable holds a secret, by its name or by a URL with credentials in it."""
    return secret_name(name) or credentials_in(value)


def secret_name(name: str) -> bool:
    """Whether a variable's name says it holds a secret: it contains one of
    ``SECRET_PARTS``, or one of its ``_``-separated words is one of ``SECRET_WORDS``, in any
    case (``GITHUB_TOKEN``, ``GH_PAT``, ``DB_PASS``, ``SENTRY_DSN``, ``SSH_AUTH_SOCK``)."""
    upper = name.upper()
    if upper in NOT_SECRET:
        return False
    return any(part in upper for part in SECRET_PARTS) or any(
        word in SECRET_WORDS for word in upper.replace("-", "_").split("_")
    )


def credentials_in(value: str) -> bool:
    """Whether ``value`` holds a URL with a user or password (``scheme://user:pw@host``)."""
    start = value.find("://")
    while start != -1:
        authority = value[start + 3 :]
        for end in "/?# \t\n,;":
            authority = authority.split(end, 1)[0]
        if "@" in authority:
            return True
        start = value.find("://", start + 3)
    return False
