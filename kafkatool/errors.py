"""The root of the project's one error tree.

Every exception kafkatool raises derives from :class:`KafkatoolError`, so a caller (the
commands' error handler, the broker's request loop) can tell the project's own errors from
bugs with one ``except``.  Where callers also catch a builtin kind, a class keeps that base
too (``class LogDirLockedError(KafkatoolError, OSError)``).  This module imports nothing, so
every layer may use it, formats/ and protocol/ included (the one exception to "formats
imports nothing of the project").

The branches: formats.errors.FormatError (bytes that do not decode, with the byte position;
protocol, checkpoint, index, snapshot and payload errors below it), the storage engine's
(lock, offsets, producer state, maintenance), settings, the broker's request-level errors,
ZooKeeper, assignment, the fleet scan and the commands' input errors.
"""

from __future__ import annotations


class KafkatoolError(Exception):
    """Base of every error the project raises."""
