"""The leader-epoch cache of one partition (``leader-epoch-checkpoint``): Kafka's LeaderEpochFileCache."""

from __future__ import annotations

import os
from pathlib import Path

from kafkatool.formats import checkpoint as ck
from kafkatool.log import fileops
from kafkatool.log.file_records import read_regular


class LeaderEpochCache:
    """(epoch, start offset) pairs in increasing order of both, persisted on every change."""

    def __init__(self, path: str | os.PathLike, *, writable: bool = True, entries=None):
        self.path = path if isinstance(path, Path) else Path(path)
        self.writable = writable
        if entries is not None:
            self.entries = list(entries)
        else:
            try:
                self.entries = ck.decode_leader_epoch_checkpoint(read_regular(self.path))
            except FileNotFoundError:
                self.entries = []

    @property
    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> None:
        """Add an epoch: entries with epoch >= it or start >= its start are dropped first."""
        if epoch < 0:
            raise ValueError(f"cannot assign a negative leader epoch {epoch}")
        if self.entries and epoch == self.entries[-1][0] and start_offset >= self.entries[-1][1]:
            return  # Kafka's isUpdateNeeded
        self.entries = [(e, s) for e, s in self.entries if e < epoch and s < start_offset]
        self.entries.append((epoch, start_offset))
        if flush:
            self.flush()

    def assign_if_newer(self, epoch: int, start_offset: int, *, flush: bool = True) -> None:
        """Record ``epoch`` from ``start_offset`` if it is later than every epoch here: a batch
        of a newer epoch (appended, replicated or recovered) or a leader at a new epoch. A
        negative epoch (a batch without one) records nothing."""
        entries = self.entries  # latest_epoch's read, without a call per append
        if epoch >= 0 and (not entries or epoch > entries[-1][0]):
            self.assign(epoch, start_offset, flush=flush)

    def truncate_from_end(self, end_offset: int, *, flush: bool = True) -> None:
        """Drop entries whose start offset >= ``end_offset`` (log truncation)."""
        keep = [(e, s) for e, s in self.entries if s < end_offset]
        if keep != self.entries:
            self.entries = keep
            if flush:
                self.flush()

    def truncate_from_start(self, start_offset: int, *, flush: bool = True) -> None:
        """Log start raised: entries starting at or below it collapse into (last such epoch, start)."""
        below = [(e, s) for e, s in self.entries if s <= start_offset]
        if not below:
            return
        last_epoch = below[-1][0]
        keep = [(last_epoch, start_offset)] + [(e, s) for e, s in self.entries if s > start_offset]
        if keep != self.entries:
            self.entries = keep
            if flush:
                self.flush()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's endOffsetFor (OffsetsForLeaderEpoch): (epoch, end offset), (-1, -1) if unknown."""
        if epoch < 0 or not self.entries:
            return -1, -1
        if epoch == self.entries[-1][0]:
            return epoch, log_end_offset
        higher = next((e for e in self.entries if e[0] > epoch), None)
        if higher is None:
            return -1, -1
        floor = None
        for e in self.entries:
            if e[0] <= epoch:
                floor = e
        if floor is None:
            return epoch, higher[1]
        return floor[0], higher[1]

    def clear(self, *, flush: bool = True) -> None:
        self.entries = []
        if flush:
            self.flush()

    def flush(self) -> None:
        if self.writable:
            fileops.atomic_write(self.path, ck.encode_leader_epoch_checkpoint(self.entries))
