"""Walls around the programs the agent starts."""
