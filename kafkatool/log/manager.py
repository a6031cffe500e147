"""All log dirs of a broker: Kafka's LogManager (lock files, checkpoints, clean-shutdown marker).

Start-up, per dir: take ``.lock`` (a second process cannot open the dir for
writing), note whether ``.kafka_cleanshutdown`` exists and delete it *before*
loading (a crash while loading counts as unclean), read the recovery-point,
log-start-offset and replication-offset checkpoints, then open every
partition dir (recovering as needed).  Shutdown: flush and close every log,
write the checkpoints and the marker, release the locks.

``writable=False`` opens everything read-only and takes no lock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.formats import checkpoint as ck
from kafkatool.formats.errors import FormatError
from kafkatool.formats.uuid import Uuid
from kafkatool.log import fileops, lock
from kafkatool.log.config import LogConfig
from kafkatool.log.log import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    STRAY_DIR_SUFFIX,
    Log,
    parse_topic_partition,
)

METADATA_TOPIC_DIR = "__cluster_metadata-0"
REMOTE_INDEX_CACHE_DIR = "remote-log-index-cache"
IGNORED_DIRS = (METADATA_TOPIC_DIR, REMOTE_INDEX_CACHE_DIR)

TopicPartition = tuple[str, int]


def read_offset_checkpoint(path: Path) -> tuple[dict[TopicPartition, int], str | None]:
    """Entries, or ({}, why) when the file is unreadable (Kafka then treats every offset as 0)."""
    try:
        return ck.decode_offset_checkpoint(path.read_bytes()), None
    except FileNotFoundError:
        return {}, None
    except FormatError as exc:
        return {}, f"{path}: {exc}"


def partition_dirs(log_dir: Path) -> list[tuple[Path, TopicPartition]]:
    """Partition dirs Kafka would load from ``log_dir`` (not ``-delete`` dirs, not the KRaft
    metadata log); dirs whose names do not parse are left out."""
    out = []
    for name in sorted(os.listdir(log_dir)):
        path = log_dir / name
        if not path.is_dir() or name in IGNORED_DIRS or name.endswith(DELETE_DIR_SUFFIX):
            continue
        tp = parse_topic_partition(name)
        if tp is not None:
            out.append((path, tp))
    return out


class NotKafkaDataError(FormatError):
    """A path that names neither Kafka files, a partition dir nor a log dir: an input
    error (exit 2) for every command."""

    kind = "not_kafka_data"


@dataclass
class LogDirTargets:
    log_dir: Path
    partitions: list[tuple[Path, TopicPartition]] = field(default_factory=list)


_LOG_DIR_MARKERS = {
    ck.RECOVERY_POINT_CHECKPOINT,
    ck.LOG_START_OFFSET_CHECKPOINT,
    "meta.properties",
    lock.LOCK_FILE,
    ".kafka_cleanshutdown",
}


def looks_like_log_dir(path: Path) -> bool:
    """A log dir: Kafka's marker files, or partition dirs (``topic-N``) inside."""
    names = set(os.listdir(path))
    if names & _LOG_DIR_MARKERS:
        return True
    return any((path / n).is_dir() and parse_topic_partition(n) for n in names)


def is_partition_path(path: Path) -> bool:
    """A partition dir: ``topic-N`` holding segments, or ``topic-N`` not inside-out a log dir."""
    tp = parse_topic_partition(path.name)
    if tp is None:
        return False
    names = os.listdir(path)
    if any(n.endswith(".log") or n.endswith(".log.swap") for n in names):
        return True
    return not looks_like_log_dir(path)


def resolve_path(path: str | os.PathLike) -> tuple[Path, list[tuple[Path, TopicPartition]]]:
    """What a directory PATH names, by the one rule every command uses: (its log dir, the
    partition dirs to work on).  An empty dir is an empty log dir; anything else that is
    neither a partition dir nor a log dir is not Kafka data."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(2, "No such file or directory", str(p))
    if not p.is_dir():
        raise NotKafkaDataError(f"{p}: not a directory (give a partition dir topic-N or a log dir)")
    real = p.resolve()  # `.` and `..` name a dir too
    if is_partition_path(real):
        tp = parse_topic_partition(real.name)
        assert tp is not None
        return real.parent, [(real, tp)]
    if looks_like_log_dir(real) or not os.listdir(real):
        return real, [(q.resolve(), tp) for q, tp in partition_dirs(real)]
    raise NotKafkaDataError(f"{p}: neither a partition dir (topic-N) nor a Kafka log dir")


def find_targets(paths: list[Path]) -> list[LogDirTargets]:
    """PATH... -> partition dirs grouped by log dir, each once, in argument order."""
    by_dir: dict[Path, LogDirTargets] = {}
    for path in paths:
        log_dir, parts = resolve_path(path)
        t = by_dir.setdefault(log_dir, LogDirTargets(log_dir))
        for part, tp in parts:
            if all(q != part for q, _ in t.partitions):
                t.partitions.append((part, tp))
    return list(by_dir.values())


@dataclass
class LogDirState:
    path: Path
    had_clean_shutdown: bool
    recovery_points: dict[TopicPartition, int] = field(default_factory=dict)
    log_start_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    high_watermarks: dict[TopicPartition, int] = field(default_factory=dict)
    #: cleaner-offset-checkpoint as found at start-up (the cleaner only records compacted logs)
    cleaner_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    fully_loaded: bool = False


class LogManager:
    def __init__(
        self,
        log_dirs: list[str | os.PathLike],
        config: LogConfig | None = None,
        *,
        topic_configs: dict[str, LogConfig] | None = None,
        writable: bool = True,
        clock: Callable[[], int] | None = None,
        broker_epoch: int = -1,
    ):
        self.config = config or LogConfig()
        self.topic_configs = dict(topic_configs or {})
        self.writable = writable
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.broker_epoch = broker_epoch
        self.dirs: dict[Path, LogDirState] = {}
        self.logs: dict[TopicPartition, Log] = {}
        self.future_logs: dict[TopicPartition, Log] = {}
        self.stray_logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        self._closed = False
        try:
            for d in log_dirs:
                self._open_dir(Path(d))
        except BaseException:
            self._abort()
            raise

    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.config)

    def _open_dir(self, log_dir: Path) -> None:
        if self.writable:
            log_dir.mkdir(parents=True, exist_ok=True)
            lock.acquire(log_dir)
        marker = log_dir / ck.CLEAN_SHUTDOWN_FILE
        state = LogDirState(log_dir, marker.exists())
        self.dirs[log_dir] = state
        if self.writable and state.had_clean_shutdown:
            fileops.delete(marker)
            fileops.fsync_dir(log_dir)
        for name, attr in (
            (ck.RECOVERY_POINT_CHECKPOINT, "recovery_points"),
            (ck.LOG_START_OFFSET_CHECKPOINT, "log_start_offsets"),
            (ck.REPLICATION_OFFSET_CHECKPOINT, "high_watermarks"),
            (ck.CLEANER_OFFSET_CHECKPOINT, "cleaner_offsets"),
        ):
            entries, warning = read_offset_checkpoint(log_dir / name)
            setattr(state, attr, entries)
            if warning:
                state.warnings.append(warning)
        for name in sorted(os.listdir(log_dir)):
            path = log_dir / name
            if path.is_dir() and name not in IGNORED_DIRS and parse_topic_partition(name) is None:
                state.skipped.append(name)
        for path, tp in partition_dirs(log_dir):
            self._load_log(state, path, tp)
        state.fully_loaded = True

    def _load_log(self, state: LogDirState, path: Path, tp: TopicPartition) -> Log:
        log = Log(
            path,
            self.config_for(tp[0]),
            log_start_offset=state.log_start_offsets.get(tp, 0),
            recovery_point=state.recovery_points.get(tp, 0),
            had_clean_shutdown=state.had_clean_shutdown,
            writable=self.writable,
            clock=self.clock,
        )
        hw = state.high_watermarks.get(tp)
        if hw is not None:
            log.update_high_watermark(hw)
        if path.name.endswith(FUTURE_DIR_SUFFIX):
            self.future_logs[tp] = log  # an alter-log-dirs copy in progress
            return log
        if path.name.endswith(STRAY_DIR_SUFFIX):
            self.stray_logs[tp] = log  # KRaft: not in the metadata; kept, never served
            return log
        if tp in self.logs:
            raise FormatError(
                f"duplicate log directories for {tp[0]}-{tp[1]}: {self._log_dir_of[tp]} and {state.path}"
            )
        self.logs[tp] = log
        self._log_dir_of[tp] = state.path
        return log

    # ------------------------------------------------------------------ logs
    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def create_log(
        self,
        topic: str,
        partition: int,
        *,
        log_dir: str | os.PathLike | None = None,
        topic_id: Uuid | None = None,
    ) -> Log:
        tp = (topic, partition)
        if tp in self.logs:
            return self.logs[tp]
        if not self.writable:
            raise OSError("log manager opened read-only")
        if log_dir is None:
            # Kafka picks the dir with the fewest partitions
            counts = {d: 0 for d in self.dirs}
            for d in self._log_dir_of.values():
                counts[d] += 1
            log_dir = min(counts, key=lambda d: (counts[d], str(d)))
        log_dir = Path(log_dir)
        path = log_dir / f"{topic}-{partition}"
        fileops.mkdir(path)
        log = Log(path, self.config_for(topic), writable=True, clock=self.clock, topic_id=topic_id)
        self.logs[tp] = log
        self._log_dir_of[tp] = log_dir
        return log

    def log_dir_of(self, topic: str, partition: int) -> Path:
        return self._log_dir_of[(topic, partition)]

    # ------------------------------------------------------------------ checkpoints
    def _per_dir(self, value: Callable[[Log], int | None]) -> dict[Path, dict[TopicPartition, int]]:
        out: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.dirs}
        for tp, log in sorted(self.logs.items()):
            v = value(log)
            if v is not None:
                out[self._log_dir_of[tp]][tp] = v
        return out

    def checkpoint_recovery_points(self) -> None:
        for d, entries in self._per_dir(lambda log: log.recovery_point).items():
            fileops.atomic_write(d / ck.RECOVERY_POINT_CHECKPOINT, ck.encode_offset_checkpoint(entries))

    def checkpoint_log_start_offsets(self) -> None:
        # only logs whose start is above their first segment's base are listed
        def start(log: Log) -> int | None:
            first = log.segments[0].base_offset if log.segments else log.log_start_offset
            return log.log_start_offset if log.log_start_offset > first else None

        for d, entries in self._per_dir(start).items():
            fileops.atomic_write(d / ck.LOG_START_OFFSET_CHECKPOINT, ck.encode_offset_checkpoint(entries))

    def checkpoint_high_watermarks(self) -> None:
        for d, entries in self._per_dir(lambda log: log.high_watermark).items():
            fileops.atomic_write(d / ck.REPLICATION_OFFSET_CHECKPOINT, ck.encode_offset_checkpoint(entries))

    # ------------------------------------------------------------------ shutdown
    def shutdown(self) -> None:
        """Clean shutdown: close logs, write checkpoints and the clean-shutdown marker."""
        if self._closed:
            return
        self._closed = True
        try:
            for log in [*self.logs.values(), *self.future_logs.values(), *self.stray_logs.values()]:
                log.close()
            if self.writable:
                self.checkpoint_recovery_points()
                self.checkpoint_log_start_offsets()
                self.checkpoint_high_watermarks()
                for d, state in self.dirs.items():
                    if state.fully_loaded:
                        fileops.atomic_write(
                            d / ck.CLEAN_SHUTDOWN_FILE, ck.encode_clean_shutdown(self.broker_epoch)
                        )
        finally:
            for d in self.dirs:
                if self.writable:
                    lock.release(d)

    close = shutdown

    def _abort(self) -> None:
        for log in [*self.logs.values(), *self.future_logs.values(), *self.stray_logs.values()]:
            try:
                log._close_segments(trim=False)
            except OSError:
                pass
        if self.writable:
            for d in self.dirs:
                lock.release(d)
        self._closed = True

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
