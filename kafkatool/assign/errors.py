"""Errors raised by the planners and the reassignment machinery."""

from __future__ import annotations

from kafkatool.errors import KafkatoolError


class AssignError(KafkatoolError, ValueError):
    """Input a planner or a reassignment cannot work with (bad brokers, racks, replicas...)."""
