"""The agent loop: a turn's model calls, tool calls and steps."""
