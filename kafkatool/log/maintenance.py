"""Opening partitions of a stopped broker for an offline maintenance tool (retention, compact).

What a broker does around its log maintenance, done by hand for one run:

* The dir is held by a tool-mode :class:`~kafkatool.log.manager.LogManager`
  (``writable=not dry_run, load=False``), the one owner of ``.lock``, the
  checkpoints and the clean-shutdown marker: a modifying run takes the lock
  (refused, with a clear message, while a broker or another tool holds it), a
  ``--dry-run`` only reads; the marker is deleted before the first change and
  written back when the run succeeds, so a run that dies half-way leaves a dir
  the next broker start recovers; checkpoints change only in the entries of the
  partitions this run touched.
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

from kafkatool.errors import KafkatoolError
from kafkatool.log import fileops
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log
from kafkatool.log.manager import (  # noqa: F401 (find_targets, LogDirTargets: re-exported)
    LogDirTargets,
    LogManager,
    find_targets,
    partition_dirs,
)
from kafkatool.log.recovery import QUARANTINE_DIR, plan_partition, utc_stamp
from kafkatool.log.segment import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX

TopicPartition = tuple[str, int]

HW_FROM_CHECKPOINT = "replication-offset-checkpoint"
HW_FROM_LOG_END = "log end offset (no replication-offset-checkpoint entry)"


class MaintenanceError(KafkatoolError):
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


def open_for_maintenance(
    manager: LogManager, part_dir: Path, tp: TopicPartition, config: LogConfig, now_ms: int
) -> OpenedLog:
    """One partition of a dir a tool-mode :class:`LogManager` holds, for retention or compaction.

    A modifying run refuses a partition whose start-up recovery would cut data (the dir
    was not shut down cleanly: ``kafkatool recover`` keeps what recovery cuts, opening
    the log here would silently drop it) and deletes the clean-shutdown marker before
    its first change; a dry run opens read-only with the same recovery point and
    shutdown state, so it sees exactly the data a real run would keep."""
    state = manager.state_of(part_dir.parent)
    rp = state.recovery_points.get(tp, 0)
    lso = state.log_start_offsets.get(tp, 0)
    notes: list[str] = []
    leftovers = leftover_files(part_dir)
    if manager.writable:
        if not state.had_clean_shutdown:
            plan = plan_partition(part_dir, config, recovery_point=rp, log_start_offset=lso)
            if any(c.bytes for c in plan.cuts) or plan.dropped:
                raise MaintenanceError(
                    f"{part_dir}: the log dir was not shut down cleanly and start-up recovery would cut "
                    f"{plan.cut_bytes} bytes from this partition; run `kafkatool recover` first"
                )
        if leftovers:
            notes.append(f"finished or rolled back an interrupted operation ({', '.join(leftovers)})")
        manager.begin_changes(part_dir.parent)
    elif leftovers:
        notes.append(
            f"leftovers of an interrupted operation ({', '.join(leftovers)}); a real run lets "
            "Kafka's loader finish or roll them back first"
        )
    log = manager.open_log(part_dir, tp, config)
    if not manager.writable:
        log.rebuild_producer_state(now_ms)
    if tp in state.high_watermarks:
        source = HW_FROM_CHECKPOINT
    else:
        log.update_high_watermark(log.log_end_offset)
        source = HW_FROM_LOG_END
    return OpenedLog(log, tp, source, notes)


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
