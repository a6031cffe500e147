"""Opening partitions of a stopped broker for an offline maintenance tool (retention, compact).

What a broker does around its log maintenance, done by hand for one run:

* ``.lock``: a modifying run takes the log dir's lock (refused, with a clear
  message, while a broker or another tool holds it); a ``--dry-run`` only
  reads and never takes it.
* ``.kafka_cleanshutdown``: deleted before the first change and written back
  at the end when it was there, as LogManager does around start-up and
  shutdown; a run that dies half-way therefore leaves a dir the next broker
  start recovers (every interrupted ``.cleaned``/``.swap``/``.deleted`` step is
  finished or rolled back by the loader either way).
* Checkpoints: read at the start (recovery points, log start offsets, high
  watermarks, cleaner offsets) and rewritten atomically at the end, changing
  only the entries of the partitions this run touched.
* A partition that was not shut down cleanly and whose start-up recovery
  would cut data is refused: ``kafkatool recover`` keeps what recovery cuts,
  opening the log here would silently drop it.
* Quarantine: what a run removes is kept (hard links, so no copy) under the
  quarantine folder ``kafkatool recover`` uses, unless the operator opts out.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.formats import checkpoint as ck
from kafkatool.log import fileops, lock
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log
from kafkatool.log.manager import (  # noqa: F401 (find_targets, LogDirTargets: re-exported)
    LogDirTargets,
    find_targets,
    partition_dirs,
    read_offset_checkpoint,
)
from kafkatool.log.producer_state import ProducerStateManager
from kafkatool.log.recovery import QUARANTINE_DIR, plan_partition, utc_stamp
from kafkatool.log.segment import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX

TopicPartition = tuple[str, int]

HW_FROM_CHECKPOINT = "replication-offset-checkpoint"
HW_FROM_LOG_END = "log end offset (no replication-offset-checkpoint entry)"


class MaintenanceError(Exception):
    """A partition or dir the tool must not touch (reported as one line, exit 2)."""


def leftover_files(part_dir: Path) -> list[str]:
    """Files of an interrupted operation (``.cleaned``, ``.swap``, ``.deleted``)."""
    return sorted(
        n
        for n in os.listdir(part_dir)
        if n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX))
        or (n.endswith(DELETED_SUFFIX) and ".checkpoint" not in n)
    )


@dataclass
class OpenedLog:
    log: Log
    topic_partition: TopicPartition
    hw_source: str
    notes: list[str] = field(default_factory=list)


class LogDirSession:
    """One log dir for one run: lock, clean-shutdown marker, checkpoints (see the module doc)."""

    def __init__(self, log_dir: Path, *, modify: bool, now_ms: int):
        self.log_dir = Path(log_dir)
        self.modify = modify
        self.now_ms = now_ms
        self.warnings: list[str] = []
        self.recovery_points = self._read(ck.RECOVERY_POINT_CHECKPOINT)
        self.log_start_offsets = self._read(ck.LOG_START_OFFSET_CHECKPOINT)
        self.high_watermarks = self._read(ck.REPLICATION_OFFSET_CHECKPOINT)
        self.cleaner_offsets = self._read(ck.CLEANER_OFFSET_CHECKPOINT)
        self.marker = self.log_dir / ck.CLEAN_SHUTDOWN_FILE
        self.clean_shutdown = self.marker.exists()
        self._marker_bytes = self.marker.read_bytes() if self.clean_shutdown else b""
        self.locked_by_other = lock.is_locked(self.log_dir)
        self._held = False
        self._marker_removed = False
        self._changed: dict[str, dict[TopicPartition, int | None]] = {}

    def _read(self, name: str) -> dict[TopicPartition, int]:
        entries, warning = read_offset_checkpoint(self.log_dir / name)
        if warning:
            self.warnings.append(warning + " (treated as empty, as Kafka does)")
        return entries

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> LogDirSession:
        if self.modify:
            lock.acquire(self.log_dir)
            self._held = True
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if self.modify:
                # entries only exist for partitions closed after a complete run, so they are
                # right even when a later partition failed; the marker only comes back on success
                try:
                    self._write_checkpoints()
                except Exception:
                    if exc_type is None:
                        raise
                if exc_type is None and self._marker_removed:
                    fileops.atomic_write(self.marker, self._marker_bytes or ck.encode_clean_shutdown(-1))
        finally:
            if self._held:
                lock.release(self.log_dir)
                self._held = False

    def _begin_changes(self) -> None:
        """Called before the first change to the dir: a crash from here on is an unclean shutdown."""
        if self.clean_shutdown and not self._marker_removed:
            fileops.delete(self.marker)
            fileops.fsync_dir(self.log_dir)
            self._marker_removed = True

    # ------------------------------------------------------------ partitions
    def open(self, part_dir: Path, tp: TopicPartition, config: LogConfig) -> OpenedLog:
        rp = self.recovery_points.get(tp, 0)
        lso = self.log_start_offsets.get(tp, 0)
        notes: list[str] = []
        leftovers = leftover_files(part_dir)
        if self.modify:
            if not self.clean_shutdown:
                plan = plan_partition(part_dir, config, recovery_point=rp, log_start_offset=lso)
                if any(c.bytes for c in plan.cuts) or plan.dropped:
                    raise MaintenanceError(
                        f"{part_dir}: the log dir was not shut down cleanly and start-up recovery would cut "
                        f"{plan.cut_bytes} bytes from this partition; run `kafkatool recover` first"
                    )
            if leftovers:
                notes.append(f"finished or rolled back an interrupted operation ({', '.join(leftovers)})")
            self._begin_changes()
        elif leftovers:
            notes.append(
                f"leftovers of an interrupted operation ({', '.join(leftovers)}); a real run lets "
                "Kafka's loader finish or roll them back first"
            )
        # a dry run opens read-only with the same recovery point and shutdown state as a real
        # run: it sees exactly the data a real run would keep
        log = Log(
            part_dir,
            config,
            log_start_offset=lso,
            recovery_point=rp,
            had_clean_shutdown=self.clean_shutdown,
            writable=self.modify,
            clock=lambda: self.now_ms,
        )
        if not self.modify:
            _replay_producer_state(log, self.now_ms)
        hw = self.high_watermarks.get(tp)
        if hw is not None:
            log.update_high_watermark(hw)
            source = HW_FROM_CHECKPOINT
        else:
            log.update_high_watermark(log.log_end_offset)
            source = HW_FROM_LOG_END
        return OpenedLog(log, tp, source, notes)

    def close(self, opened: OpenedLog) -> None:
        log = opened.log
        if self.modify:
            log.close()
            tp = opened.topic_partition
            self._set(ck.RECOVERY_POINT_CHECKPOINT, tp, log.recovery_point)
            first = log.segments[0].base_offset if log.segments else log.log_start_offset
            self._set(
                ck.LOG_START_OFFSET_CHECKPOINT,
                tp,
                log.log_start_offset if log.log_start_offset > first else None,
            )
        else:
            log.close()

    def abandon(self, opened: OpenedLog) -> None:
        """After a failure: release the files without flushing, snapshotting or recording
        checkpoints (the next start-up treats the partition as not shut down cleanly)."""
        opened.log._close_segments(trim=False)

    def set_cleaner_offset(self, tp: TopicPartition, offset: int) -> None:
        self._set(ck.CLEANER_OFFSET_CHECKPOINT, tp, offset)

    def _set(self, name: str, tp: TopicPartition, value: int | None) -> None:
        self._changed.setdefault(name, {})[tp] = value

    def _write_checkpoints(self) -> None:
        current = {
            ck.RECOVERY_POINT_CHECKPOINT: self.recovery_points,
            ck.LOG_START_OFFSET_CHECKPOINT: self.log_start_offsets,
            ck.CLEANER_OFFSET_CHECKPOINT: self.cleaner_offsets,
        }
        for name, changes in self._changed.items():
            entries = dict(current[name])
            for tp, value in changes.items():
                if value is None:
                    entries.pop(tp, None)
                else:
                    entries[tp] = value
            path = self.log_dir / name
            if entries == current[name] and (path.exists() or not entries):
                continue
            fileops.atomic_write(path, ck.encode_offset_checkpoint(dict(sorted(entries.items()))))
            current[name].clear()
            current[name].update(entries)


def _replay_producer_state(log: Log, now_ms: int) -> None:
    """Producer state of a read-only log (dry runs): the latest snapshot, then the batches after it."""
    psm: ProducerStateManager = log.producer_state
    psm.load_from_snapshot(log.log_start_offset, now_ms)
    start = max(psm.map_end_offset, log.log_start_offset)
    if start >= log.log_end_offset:
        return
    for batch in log.batches(start):
        if batch.last_offset < start:
            continue
        completed = psm.update(batch)
        if completed is not None:
            psm.complete_txn(completed)


# ---------------------------------------------------------------- quarantine


class Quarantine:
    """``<partition dir>/kafkatool-quarantine/<UTC time>/`` (the folder ``kafkatool recover`` uses;
    Kafka's loader skips subdirectories of a partition dir).  Files are hard links taken just
    before the engine removes the originals, so keeping them costs no copy."""

    def __init__(self, part_dir: Path, tool: str, stamp: str | None = None):
        self.part_dir = Path(part_dir)
        self.tool = tool
        self.stamp = stamp or utc_stamp()
        self.dir = self.part_dir / QUARANTINE_DIR / self.stamp
        self.files: list[Path] = []

    def _target(self, name: str) -> Path:
        target = self.dir / name
        n = 1
        while os.path.lexists(target):
            target = self.dir / f"{name}.{n}"
            n += 1
        return target

    def keep(self, src: Path, description: dict) -> Path:
        """Hard-link ``src`` into the quarantine (copy when links are impossible) with a ``.json`` sidecar."""
        fileops.mkdir(self.dir)
        target = self._target(src.name)
        fileops.fault_point("link", target)
        try:
            os.link(src, target)
        except OSError:
            fileops.copy_range(src, 0, src.stat().st_size, target)
        side = {"origin": str(src), "tool": self.tool, "time": self.stamp, **description}
        fileops.atomic_write(
            target.with_name(target.name + ".json"), json.dumps(side, indent=2).encode() + b"\n"
        )
        self.files.append(target)
        return target
