"""trellisd: a coding-agent daemon for editors, over JSON-RPC on stdio."""

__version__ = "0.1.0"
PROTOCOL_VERSION = "0.1"
