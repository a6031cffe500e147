"""Log dirs and their one owner: Kafka's LogManager.

:class:`LogManager` is the only code that takes a log dir's ``.lock``, reads and
writes its offset checkpoints (recovery points, log start offsets, high
watermarks, cleaner offsets) and clean-shutdown marker, deletes a partition and
moves one between log dirs; :func:`resolve_path` is the one rule for what a PATH
names.  The broker and every tool open dirs through it, in one of its modes:

* **read-only** (``writable=False``): no lock, nothing written; forensic reads
  and dry runs, safe on a live broker's dir.
* **broker** (``writable=True, load=True``): take ``.lock``, note whether
  ``.kafka_cleanshutdown`` exists and delete it *before* loading (a crash while
  loading counts as unclean), read the checkpoints, open every partition dir
  (recovering as needed).  Shutdown: flush and close every log, write every
  checkpoint and the marker, release the locks.
* **tool** (``writable=True, load=False``): take ``.lock`` (refused while a broker
  or another tool holds it) and open only the partitions a run works on
  (:meth:`LogManager.open_log`).  The marker is deleted before the first change
  (:meth:`LogManager.begin_changes`) and written back only when the run
  succeeds; checkpoints change only in the entries of the partitions the run
  touched, and a file is rewritten only when an entry changed.

Checkpoint files are written by whoever owns the manager, on its thread, unless it sets
:attr:`LogManager.checkpoint_writer`: a broker does, so the event loop only takes a
snapshot of the entries (cheap) and its scheduler thread writes and fsyncs the file, as
Kafka's ``kafka-scheduler`` does (an fsync of a small file on ext4 waits for the journal
commit, which under a heavy write load waits for gigabytes of other data: 1.7 s measured).
Every snapshot and synchronous write carries a sequence number, and a file is never
written with an older snapshot than the one it holds.  Deleting a partition and moving one
between log dirs still write their dirs' checkpoints at once, as Kafka's do.

A broker of several processes (``kafkatool.processes``, broker/processes.py) shares its
log dirs between managers, each given the partitions it owns (``owns``): the first process
takes the lock, keeps the clean-shutdown marker and is the only writer of the checkpoint
files, into which it folds the other processes' entries (:meth:`LogManager.merge_entries`);
the others (``member=True``) take no lock, leave the marker alone and hand every checkpoint
write to :attr:`LogManager.checkpoint_sink`.

A broker's log dir fails as in Kafka (LogDirFailureChannel, LogManager.handleLogDirFailure):
an I/O error of any log operation is reported with :meth:`LogManager.report_io_error`, the
first report of a dir marks it offline (once; :attr:`LogManager.on_offline_dir` lets the
broker log it and take the dir offline on its own thread), and :meth:`LogManager.take_offline`
drops its logs (their partitions are :attr:`LogManager.offline_partitions`), releases its lock
and leaves it out of every later checkpoint and of the clean-shutdown marker.  At start-up a
dir that cannot be locked for an I/O reason, listed or loaded is offline from the start, as
long as another dir is usable.  An offline dir stays offline until the broker restarts.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.errors import KafkatoolError
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
from kafkatool.log.segment import Segment

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
    return _scan_log_dir(log_dir)[0]


def _scan_log_dir(log_dir: Path) -> tuple[list[tuple[Path, TopicPartition]], list[str]]:
    """(partition dirs as :func:`partition_dirs` gives them, the other dirs whose names do not
    parse) in one scandir: a broker's start-up lists a dir of thousands of partitions once."""
    out, skipped = [], []
    with os.scandir(log_dir) as it:
        dirs = []
        for entry in it:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = Path(entry.path).is_dir()
            if is_dir:
                dirs.append(entry.name)
    for name in sorted(dirs):
        if name in IGNORED_DIRS:
            continue
        tp = parse_topic_partition(name)
        if tp is None:
            skipped.append(name)
        elif not name.endswith(DELETE_DIR_SUFFIX):
            out.append((log_dir / name, tp))
    return out, skipped


def _suffixed(part_dir: Path, suffix: str) -> Path:
    """UnifiedLog.logDirNameWithSuffix: ``<topic>-<partition>.<32 hex>`` + ``suffix``."""
    return part_dir.with_name(f"{part_dir.name}.{uuid.uuid4().hex}{suffix}")


def log_error_message(lg: Log | Segment, action: str) -> str:
    """Kafka's line for an I/O error of a log operation (UnifiedLog/LocalLog's
    maybeHandleIOException messages): ``Error while <action> <topic-partition> in dir <dir>``
    (of a Log or of one of its segments: the partition dir names both)."""
    return f"Error while {action} {lg.dir.name} in dir {lg.dir.parent}"


class LogDirOfflineError(KafkatoolError, OSError):
    """A log operation on (or needing) a log dir that is offline: Kafka's KafkaStorageException
    for a partition of a failed dir (handlers answer KAFKA_STORAGE_ERROR)."""


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


def log_end_offset_lag(current: Log | None, log_end_offset: int, is_future: bool) -> int:
    """ReplicaManager.getLogEndOffsetLag, the offsetLag DescribeLogDirs answers for a replica
    whose log ends at ``log_end_offset``: a current replica's high watermark minus it (never
    below 0), a future replica's current replica's log end minus it; -1 (INVALID_OFFSET_LAG)
    without a current replica (not created, or in an offline dir)."""
    if current is None:
        return -1
    if is_future:
        return current.log_end_offset - log_end_offset
    return max(current.high_watermark - log_end_offset, 0)


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
    #: each offset checkpoint as this manager knows it (read at open, then kept current)
    checkpoints: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    #: each offset checkpoint as last read from or written to disk
    on_disk: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    fully_loaded: bool = False
    #: (tool mode) the marker's bytes when the run deleted it, to put back on success
    marker_removed: bytes | None = None
    #: (read-only mode) another process holds the dir's lock
    locked_by_other: bool = False
    #: each offset checkpoint's newest snapshot handed to a writer (None after a failed write)
    snapshot: dict[str, dict[TopicPartition, int] | None] = field(default_factory=dict)
    #: each offset checkpoint's newest sequence number written (or found already on disk)
    written_seq: dict[str, int] = field(default_factory=dict)
    #: (broker mode) why the dir is offline (Kafka's offline log dir); None while it is online
    offline: str | None = None

    @property
    def recovery_points(self) -> dict[TopicPartition, int]:
        return self.checkpoints[ck.RECOVERY_POINT_CHECKPOINT]

    @property
    def log_start_offsets(self) -> dict[TopicPartition, int]:
        return self.checkpoints[ck.LOG_START_OFFSET_CHECKPOINT]

    @property
    def high_watermarks(self) -> dict[TopicPartition, int]:
        return self.checkpoints[ck.REPLICATION_OFFSET_CHECKPOINT]

    @property
    def cleaner_offsets(self) -> dict[TopicPartition, int]:
        return self.checkpoints[ck.CLEANER_OFFSET_CHECKPOINT]


OFFSET_CHECKPOINTS = (
    ck.RECOVERY_POINT_CHECKPOINT,
    ck.LOG_START_OFFSET_CHECKPOINT,
    ck.REPLICATION_OFFSET_CHECKPOINT,
    ck.CLEANER_OFFSET_CHECKPOINT,
)


@dataclass
class CheckpointWrite:
    """An offset checkpoint file's entries as the manager's owner saw them, for
    :meth:`LogManager.write_checkpoint` on any thread."""

    state: LogDirState
    name: str
    entries: dict[TopicPartition, int]
    seq: int


def _log_start_entry(log: Log) -> int | None:
    """log-start-offset-checkpoint lists only logs whose start is above their first segment's base."""
    first = log.segments[0].base_offset if log.segments else log.log_start_offset
    return log.log_start_offset if log.log_start_offset > first else None


class LogManager:
    """The one owner of a broker's (or a tool's) log dirs; see the module doc for the modes."""

    def __init__(
        self,
        log_dirs: list[str | os.PathLike],
        config: LogConfig | None = None,
        *,
        topic_configs: dict[str, LogConfig] | None = None,
        writable: bool = True,
        load: bool = True,
        clock: Callable[[], int] | None = None,
        broker_epoch: int = -1,
        recovery_threads: int = 1,
        owns: Callable[[TopicPartition], bool] | None = None,
        member: bool = False,
        clean_shutdown: dict[str, bool] | None = None,
        offline: dict[str, str] | None = None,
        stray: Callable[[TopicPartition, Uuid | None], str | None] | None = None,
    ):
        """``recovery_threads``: Kafka's num.recovery.threads.per.data.dir, the threads that
        load (and after an unclean shutdown recover) one dir's partitions in parallel.
        ``owns``: the partitions this manager loads and checkpoints (None: every one); the
        entries of the others stay in the files as found or merged.  ``member``: another
        process of the same broker holds the dirs' locks and markers (``clean_shutdown``: what
        it found, by dir); checkpoint writes go to :attr:`checkpoint_sink`.  ``offline``: (broker
        mode) dirs already known to be unusable, with the cause (an unreadable meta.properties:
        Kafka's initialOfflineDirs); they are not opened.  ``stray``: (broker mode) why a
        loaded partition's log is not the metadata's (None: it is); such a log is set aside
        with :meth:`move_aside_stray` as it loads, never served."""
        self.config = config or LogConfig()
        self.recovery_threads = max(1, recovery_threads)
        self.topic_configs = dict(topic_configs or {})
        self.writable = writable
        self.load = load
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.broker_epoch = broker_epoch
        self.dirs: dict[Path, LogDirState] = {}
        self.logs: dict[TopicPartition, Log] = {}
        self.future_logs: dict[TopicPartition, Log] = {}
        self.stray_logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        self._closed = False
        #: None: checkpoint files are written on the calling thread; else called with a list of
        #: CheckpointWrite to write elsewhere (a broker: its scheduler thread)
        self.checkpoint_writer: Callable[[list[CheckpointWrite]], None] | None = None
        self.owns = owns
        self.member = member
        self._clean_shutdown = dict(clean_shutdown or {})
        #: member mode: called with (CheckpointWrite of this manager's entries only, now) for
        #: every checkpoint write; the owner of the files writes them
        self.checkpoint_sink: Callable[[CheckpointWrite, bool], None] | None = None
        #: False when another process of the broker did not shut down cleanly: no marker then
        self.members_clean = True
        self._adopted = False
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_seq = itertools.count(1)
        #: broker mode: the dirs :meth:`shutdown` wrote the clean-shutdown marker into
        self.marked: list[Path] = []
        #: the partitions of offline dirs (Kafka's HostedPartition.Offline): KAFKA_STORAGE_ERROR
        self.offline_partitions: set[TopicPartition] = set()
        #: called (on the reporting thread) with (dir, message, error) when a dir is first
        #: reported failed; it must get :meth:`take_offline` called (None: called at once)
        self.on_offline_dir: Callable[[Path, str, OSError], None] | None = None
        self._failure_lock = threading.Lock()
        self.stray = stray
        #: the stray logs set aside at start-up: (partition, its dir, the dir it is now, why)
        self.moved_aside: list[tuple[TopicPartition, Path, Path, str]] = []
        known_offline = {Path(d): why for d, why in (offline or {}).items()}
        try:
            for d in log_dirs:
                d = Path(d)
                if d in known_offline:
                    self._mark_offline_at_start(LogDirState(d, False), known_offline[d])
                elif self.writable and self.load:
                    self._open_or_fail(d)  # a member too: a dir its partitions fail to load in
                else:
                    self._open_dir(d)
            if self.dirs and not self.live_dirs:
                raise OSError(
                    "none of the specified log dirs from "
                    + ", ".join(str(d) for d in self.dirs)
                    + " can be created or validated: "
                    + "; ".join(f"{d}: {st.offline}" for d, st in self.dirs.items())
                )
        except BaseException:
            self._abort()
            raise

    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.config)

    @property
    def warnings(self) -> list[str]:
        return [w for st in self.dirs.values() for w in st.warnings]

    def _owned(self, tp: TopicPartition) -> bool:
        return self.owns is None or self.owns(tp)

    def _open_or_fail(self, log_dir: Path) -> None:
        """Broker mode: open one dir, or, when an I/O error stops it (creating, locking,
        listing, loading), keep it as an offline dir (Kafka's createAndValidateLogDirs and
        loadLogs: "Error while loading log dir").  Another process holding the lock and data
        that is not Kafka's still stop the start."""
        try:
            self._open_dir(log_dir)
        except lock.LogDirLockedError:
            raise
        except OSError as exc:
            self.fail_at_start(log_dir, f"Error while loading log dir {log_dir}: {exc}")

    def fail_at_start(self, log_dir: Path, why: str) -> None:
        """A dir whose start-up met an I/O error (loading it, or setting aside a stray there)
        is offline from the start: its logs are let go of and its lock released."""
        self._let_go_of_dir(log_dir)
        if not self.member:  # a member holds no lock (the primary releases it when told)
            lock.release(log_dir)
        state = self.dirs.get(log_dir) or LogDirState(log_dir, False)
        self._mark_offline_at_start(state, why)

    def _mark_offline_at_start(self, state: LogDirState, why: str) -> None:
        state.offline = why
        state.fully_loaded = False
        for name in OFFSET_CHECKPOINTS:
            state.checkpoints.setdefault(name, {})
            state.on_disk.setdefault(name, {})
            state.snapshot.setdefault(name, state.on_disk[name])
        self.dirs[state.path] = state

    def _open_dir(self, log_dir: Path) -> None:
        if self.member:
            if not (lock.is_locked(log_dir) or lock.held_here(log_dir)):
                raise OSError(f"{log_dir}: not locked by the broker this process belongs to")
        elif self.writable:
            if self.load:
                log_dir.mkdir(parents=True, exist_ok=True)
            lock.acquire(log_dir)
        marker = log_dir / ck.CLEAN_SHUTDOWN_FILE
        clean = self._clean_shutdown.get(str(log_dir)) if self.member else None
        state = LogDirState(log_dir, marker.exists() if clean is None else clean)
        self.dirs[log_dir] = state
        if not self.writable:
            state.locked_by_other = lock.is_locked(log_dir)
        if self.writable and self.load and state.had_clean_shutdown and not self.member:
            fileops.delete(marker)
            fileops.fsync_dir(log_dir)
        for name in OFFSET_CHECKPOINTS:
            entries, warning = read_offset_checkpoint(log_dir / name)
            state.checkpoints[name] = entries
            state.on_disk[name] = dict(entries)
            state.snapshot[name] = state.on_disk[name]
            if warning:
                state.warnings.append(warning + " (treated as empty, as Kafka does)")
        if not self.load:
            return
        found, skipped = _scan_log_dir(log_dir)
        state.skipped.extend(skipped)
        if self.owns is not None:
            found = [(path, tp) for path, tp in found if self.owns(tp)]
        if self.recovery_threads == 1 or len(found) < 2 or state.had_clean_shutdown:
            # after a clean shutdown nothing is recovered: loading is interpreter work that the
            # GIL runs one thread at a time, and a second thread only adds a GIL hand-off at
            # every system call (measured at 10,000 partitions: 4.3 s on one thread, 7.7 s on two)
            for path, tp in found:
                self._load_log(state, path, tp)
        else:
            # Kafka's loadLogs: a pool of num.recovery.threads.per.data.dir threads per dir; the
            # recoveries overlap their waits on the disk (fsync, truncate release the GIL);
            # the partitions are registered in dir order once all loaded
            with ThreadPoolExecutor(self.recovery_threads, thread_name_prefix="log-recovery") as pool:
                futures = [pool.submit(self._open_partition, state, path, tp) for path, tp in found]
            failed = next((f.exception() for f in futures if f.exception() is not None), None)
            if failed is not None:
                for f in futures:
                    if f.exception() is None:
                        f.result().release()
                raise failed
            logs = [f.result() for f in futures]
            for i, ((path, tp), log) in enumerate(zip(found, logs, strict=True)):
                try:
                    self._register(state, path, tp, log)
                except BaseException:
                    for rest in logs[i + 1 :]:
                        rest.release()
                    raise
        state.fully_loaded = True

    def _load_log(
        self, state: LogDirState, path: Path, tp: TopicPartition, config: LogConfig | None = None
    ) -> Log:
        return self._register(state, path, tp, self._open_partition(state, path, tp, config))

    def _open_partition(
        self, state: LogDirState, path: Path, tp: TopicPartition, config: LogConfig | None = None
    ) -> Log:
        log = Log(
            path,
            config or self.config_for(tp[0]),
            log_start_offset=state.log_start_offsets.get(tp, 0),
            recovery_point=state.recovery_points.get(tp, 0),
            had_clean_shutdown=state.had_clean_shutdown,
            writable=self.writable,
            clock=self.clock,
        )
        hw = state.high_watermarks.get(tp)
        if hw is not None:
            log.update_high_watermark(hw)
        return log

    def _register(self, state: LogDirState, path: Path, tp: TopicPartition, log: Log) -> Log:
        if path.name.endswith(FUTURE_DIR_SUFFIX):
            self.future_logs[tp] = log  # an alter-log-dirs copy in progress
            return log
        if path.name.endswith(STRAY_DIR_SUFFIX):
            self.stray_logs[tp] = log  # KRaft: not in the metadata; kept, never served
            return log
        why = self.stray(tp, log.topic_id) if self.stray is not None else None
        if why is not None:
            # before the duplicate check: the metadata's own log of a topic made again under
            # the same name may be in another dir
            log.release()
            self.move_aside_stray(path, tp, why)
            return log
        if tp in self.logs:
            log.release()
            raise FormatError(
                f"duplicate log directories for {tp[0]}-{tp[1]}: {self._log_dir_of[tp]} and {state.path}"
            )
        self.logs[tp] = log
        self._log_dir_of[tp] = state.path
        return log

    # ------------------------------------------------------------------ failed dirs
    @property
    def live_dirs(self) -> list[Path]:
        """The dirs that are online (all of them outside broker mode)."""
        return [d for d, st in self.dirs.items() if st.offline is None]

    @property
    def offline_dirs(self) -> dict[Path, str]:
        """Each offline dir with why it went offline."""
        return {d: st.offline for d, st in self.dirs.items() if st.offline is not None}

    def dir_of_path(self, path: str | os.PathLike) -> Path | None:
        """The log dir ``path`` (a partition dir or a file in one) lies in, if any."""
        path = Path(path)
        for p in (path, *path.parents):
            if p in self.dirs:
                return p
        return None

    def report_io_error(self, where: str | os.PathLike, msg: str, exc: BaseException) -> bool:
        """Kafka's LogDirFailureChannel.maybeAddOfflineLogDir, from any thread: an I/O error
        of a log operation in the log dir of ``where`` (the dir, a partition dir or a file)
        marks that dir offline.  True only for the first report of a dir (it then goes
        offline: :attr:`on_offline_dir`, or :meth:`take_offline` now); a later report, an
        error that is not the disk's (:class:`LogDirOfflineError`) or a manager outside
        broker mode changes nothing; so does running out of file descriptors (EMFILE/ENFILE:
        the process's, not the disk's; Kafka would take the dir offline)."""
        if isinstance(exc, LogDirOfflineError) or not isinstance(exc, OSError):
            return False
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            return False  # the process's descriptors, not the disk: the operation runs again later
        if not (self.writable and self.load) or self._closed:
            return False
        d = self.dir_of_path(where)
        if d is None or not self.mark_offline(d, f"{msg}: {exc}"):
            return False
        hook = self.on_offline_dir
        if hook is None:
            self.take_offline(d)
        else:
            hook(d, msg, exc)
        return True

    def mark_offline(self, log_dir: str | os.PathLike, why: str) -> bool:
        """Mark one of the manager's dirs offline (any thread), once: True only the first time
        (the caller then has :meth:`take_offline` run).  :meth:`report_io_error` marks a dir
        this way; so does a broker of several processes for a dir another process of it found
        failed."""
        state = self.dirs.get(Path(log_dir))
        if state is None:
            return False
        with self._failure_lock:
            if state.offline is not None:
                return False
            state.offline = why
        return True

    def _let_go_of_dir(self, d: Path) -> list[TopicPartition]:
        """Drop every log (current, future, stray) of dir ``d`` from the manager and release its
        files, ignoring I/O errors (the dir is failing); returns the partitions whose current
        log was there (sorted)."""
        gone = sorted(tp for tp, home in self._log_dir_of.items() if home == d)
        for tp in gone:
            self._log_dir_of.pop(tp)
            lg = self.logs.pop(tp, None)
            if lg is not None:
                with contextlib.suppress(OSError):
                    lg.release()
        for logs in (self.future_logs, self.stray_logs):
            for tp in [tp for tp, lg in logs.items() if lg.dir.parent == d]:
                with contextlib.suppress(OSError):
                    logs.pop(tp).release()
        return gone

    def take_offline(self, log_dir: str | os.PathLike) -> list[TopicPartition]:
        """Kafka's LogManager.handleLogDirFailure, on the thread that owns the logs: the dir's
        logs (current and future) stop being served and their files are let go (no flush:
        the next start-up recovers them), its checkpoints and marker are no longer written
        and its lock is released.  Returns the partitions that went offline (sorted)."""
        d = Path(log_dir)
        state = self.dirs[d]
        if state.offline is None:
            state.offline = "taken offline"
        gone = self._let_go_of_dir(d)
        self.offline_partitions.update(gone)
        state.fully_loaded = False
        if not self.member:
            lock.release(d)
        return gone

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
        is_new: bool = True,
    ) -> Log:
        """The partition's log, made in ``log_dir`` (or the live dir with the fewest
        partitions) if there is none.  ``is_new=False``: the partition existed before (its log
        may be on an offline dir), refused while any dir is offline, as Kafka does."""
        tp = (topic, partition)
        if tp in self.logs:
            return self.logs[tp]
        if not self.writable:
            raise OSError("log manager opened read-only")
        offline = self.offline_dirs
        if offline and (not is_new or tp in self.offline_partitions):
            # LogManager.getOrCreateLog: a partition that is not new may have its log on an
            # offline dir; making an empty one elsewhere would serve it without its data
            raise LogDirOfflineError(
                f"Can not create log for {topic}-{partition} because log directories "
                f"{','.join(str(d) for d in offline)} are offline"
            )
        live = self.live_dirs
        if log_dir is None and len(live) == 1:
            log_dir = live[0]
        if log_dir is None:
            if not live:
                raise LogDirOfflineError(
                    f"Can not create log for {topic}-{partition}: every log dir is offline"
                )
            # Kafka picks the dir with the fewest partitions
            counts = {d: 0 for d in live}
            for d in self._log_dir_of.values():
                if d in counts:
                    counts[d] += 1
            log_dir = min(counts, key=lambda d: (counts[d], str(d)))
        log_dir = Path(log_dir)
        if log_dir in offline:
            raise LogDirOfflineError(f"Can not create log for {topic}-{partition}: {log_dir} is offline")
        path = log_dir / f"{topic}-{partition}"
        fileops.mkdir(path)
        log = Log(path, self.config_for(topic), writable=True, clock=self.clock, topic_id=topic_id)
        self.logs[tp] = log
        self._log_dir_of[tp] = log_dir
        return log

    def log_dir_of(self, topic: str, partition: int) -> Path:
        return self._log_dir_of[(topic, partition)]

    def state_of(self, log_dir: str | os.PathLike) -> LogDirState:
        return self.dirs[Path(log_dir)]

    # ------------------------------------------------------------------ tool mode
    def open_log(self, part_dir: Path, tp: TopicPartition, config: LogConfig | None = None) -> Log:
        """Open one partition of a dir opened with ``load=False`` (with the dir's checkpoints
        and shutdown state, exactly as the broker's start-up would)."""
        state = self.dirs[Path(part_dir).parent]
        return self._load_log(state, Path(part_dir), tp, config)

    def begin_changes(self, log_dir: str | os.PathLike) -> None:
        """Before a tool's first change to a dir: delete the clean-shutdown marker, so a crash
        from here on counts as an unclean shutdown (it comes back when the run succeeds)."""
        state = self.dirs[Path(log_dir)]
        if not self.writable:
            raise OSError("log manager opened read-only")
        if state.had_clean_shutdown and state.marker_removed is None:
            marker = state.path / ck.CLEAN_SHUTDOWN_FILE
            data = marker.read_bytes() if marker.exists() else b""
            fileops.delete(marker)
            fileops.fsync_dir(state.path)
            state.marker_removed = data or ck.encode_clean_shutdown(-1)

    def close_log(self, tp: TopicPartition) -> None:
        """A tool is done with a partition: clean close, its checkpoint entries recorded
        (written when the manager closes)."""
        log = self.logs.pop(tp)
        d = self._log_dir_of.pop(tp)
        log.close()
        if self.writable:
            self._record(self.dirs[d], tp, log)

    def abandon_log(self, tp: TopicPartition) -> None:
        """After a failure: release the files without flushing, snapshotting or recording
        checkpoints (the next start-up treats the partition as not shut down cleanly)."""
        log = self.logs.pop(tp, None)
        if log is None:
            return  # its dir failed at start (a rename before it)
        self._log_dir_of.pop(tp)
        log.release()

    @contextlib.contextmanager
    def closing(self, tp: TopicPartition) -> Iterator[None]:
        """A tool's work on an open partition: :meth:`close_log` when the block ends,
        :meth:`abandon_log` when it raises."""
        try:
            yield
        except BaseException:
            self.abandon_log(tp)
            raise
        self.close_log(tp)

    def set_cleaner_offset(self, tp: TopicPartition, offset: int, log_dir: Path | None = None) -> None:
        d = log_dir if log_dir is not None else self._log_dir_of[tp]
        self.dirs[Path(d)].cleaner_offsets[tp] = offset

    def cleaner_offset(self, tp: TopicPartition) -> int | None:
        d = self._log_dir_of.get(tp)
        if d is not None:
            return self.dirs[d].cleaner_offsets.get(tp)
        for st in self.dirs.values():
            if tp in st.cleaner_offsets:
                return st.cleaner_offsets[tp]
        return None

    def lower_to_log_ends(self, log_dir: str | os.PathLike, new_ends: dict[TopicPartition, int]) -> bool:
        """After ``recover`` cut logs: no recovery point or high watermark may point past the
        log it describes (the broker's start-up clamps them the same way).  True when a
        checkpoint changed."""
        state = self.dirs[Path(log_dir)]
        changed = False
        for name in (ck.RECOVERY_POINT_CHECKPOINT, ck.REPLICATION_OFFSET_CHECKPOINT):
            entries = state.checkpoints[name]
            for tp, end in new_ends.items():
                if tp in entries and entries[tp] > end:
                    entries[tp] = end
            changed |= self._write(state, name)
        return changed

    # ------------------------------------------------------------------ checkpoints
    def _record(self, state: LogDirState, tp: TopicPartition, log: Log, *, hw: bool = False) -> None:
        """Fold a log's current offsets into its dir's checkpoints (in memory)."""
        state.recovery_points[tp] = log.recovery_point
        start = _log_start_entry(log)
        if start is None:
            state.log_start_offsets.pop(tp, None)
        else:
            state.log_start_offsets[tp] = start
        if hw:
            state.high_watermarks[tp] = log.high_watermark

    def _write(self, state: LogDirState, name: str) -> bool:
        """Write one offset checkpoint file now, on this thread, when an entry changed (tools,
        shutdown, a partition's deletion or move); True when it wrote.  An offline dir's files
        are never written again (Kafka drops its checkpoints)."""
        if state.offline is not None:
            return False
        if self.member:
            return self._hand_over(state, name, now=True)
        return self.write_checkpoint(self._snapshot(state, name))

    def _hand_over(self, state: LogDirState, name: str, *, now: bool) -> bool:
        """Member mode: this manager's entries of a file go to the process that writes it,
        when they changed since the last hand-over (``now``: it writes them at once)."""
        mine = {tp: v for tp, v in state.checkpoints[name].items() if self._owned(tp)}
        if mine == state.on_disk[name] and not now:
            return False
        if self.checkpoint_sink is None:
            raise OSError("no process takes this member's checkpoint entries")
        job = CheckpointWrite(state, name, mine, next(self._checkpoint_seq))
        self.checkpoint_sink(job, now)
        state.on_disk[name] = state.snapshot[name] = mine
        return True

    def merge_entries(
        self,
        log_dir: str | os.PathLike,
        name: str,
        entries: dict[TopicPartition, int],
        owned_by: Callable[[TopicPartition], bool],
        *,
        now: bool = False,
    ) -> None:
        """Another process's entries of one checkpoint file (every partition ``owned_by`` it):
        they replace what the file said of its partitions and are written with this manager's
        own, at once (``now``: its deletion or move) or as any checkpoint is."""
        state = self.dirs[Path(log_dir)]
        held = state.checkpoints[name]
        for tp in [tp for tp in held if owned_by(tp)]:
            del held[tp]
        held.update(entries)
        if now or self.checkpoint_writer is None:
            self._write(state, name)
        else:
            self._checkpoint([(state, name)])

    def _snapshot(self, state: LogDirState, name: str) -> CheckpointWrite:
        job = CheckpointWrite(state, name, dict(state.checkpoints[name]), next(self._checkpoint_seq))
        state.snapshot[name] = job.entries
        return job

    def _needs_write(self, state: LogDirState, name: str, entries: dict, than: dict | None) -> bool:
        # a broker also writes a missing recovery-point, log-start-offset or replication-offset
        # checkpoint, as Kafka does at every checkpoint; the cleaner's appears with its first entry
        always = state.fully_loaded and name != ck.CLEANER_OFFSET_CHECKPOINT
        return entries != than or not ((state.path / name).exists() or not (entries or always))

    def write_checkpoint(self, job: CheckpointWrite) -> bool:
        """The one writer of offset checkpoint files, on any thread: atomically, only when an
        entry changed, never over a newer snapshot.  True when it wrote; an OSError is raised
        (the owner's next checkpoint tries again)."""
        state, name = job.state, job.name
        if state.offline is not None:
            return False
        with self._checkpoint_lock:
            if job.seq <= state.written_seq.get(name, 0):
                return False  # a newer snapshot got there first
            state.written_seq[name] = job.seq
            if not self._needs_write(state, name, job.entries, state.on_disk[name]):
                state.on_disk[name] = job.entries  # equal: the newest snapshot is what is on disk
                return False
            try:
                fileops.atomic_write(
                    state.path / name, ck.encode_offset_checkpoint(dict(sorted(job.entries.items())))
                )
            except OSError:
                state.snapshot[name] = None
                raise
            state.on_disk[name] = job.entries
            return True

    def _checkpoint(self, pairs: list[tuple[LogDirState, str]]) -> None:
        """Write these (dir, file) checkpoints with their current entries: now, or through
        :attr:`checkpoint_writer`, skipping a file whose newest snapshot has them already (and
        every file of an offline dir)."""
        pairs = [(state, name) for state, name in pairs if state.offline is None]
        if self.member:
            for state, name in pairs:
                self._hand_over(state, name, now=False)
            return
        if self.checkpoint_writer is None:
            for state, name in pairs:
                self._write(state, name)
            return
        jobs = []
        for state, name in pairs:
            snap = state.snapshot.get(name)
            if snap is not state.on_disk[name]:  # a write is on its way: only a change counts
                if state.checkpoints[name] != snap:
                    jobs.append(self._snapshot(state, name))
            elif self._needs_write(state, name, state.checkpoints[name], snap):
                jobs.append(self._snapshot(state, name))
        if jobs:
            self.checkpoint_writer(jobs)

    def _refresh(self, name: str) -> None:
        for tp, log in self.logs.items():
            state = self.dirs[self._log_dir_of[tp]]
            if name == ck.RECOVERY_POINT_CHECKPOINT:
                state.recovery_points[tp] = log.recovery_point
            elif name == ck.LOG_START_OFFSET_CHECKPOINT:
                start = _log_start_entry(log)
                if start is None:
                    state.log_start_offsets.pop(tp, None)
                else:
                    state.log_start_offsets[tp] = start
            elif name == ck.REPLICATION_OFFSET_CHECKPOINT:
                state.high_watermarks[tp] = log.high_watermark
        for state in self.dirs.values():
            if state.fully_loaded:
                # a broker's checkpoints list exactly the partitions it holds
                held = {tp for tp, d in self._log_dir_of.items() if d == state.path and tp in self.logs}
                for tp in [tp for tp in state.checkpoints[name] if tp not in held and self._owned(tp)]:
                    del state.checkpoints[name][tp]
        self._checkpoint([(state, name) for state in self.dirs.values()])

    def checkpoint_recovery_points(self) -> None:
        self._refresh(ck.RECOVERY_POINT_CHECKPOINT)

    def checkpoint_log_start_offsets(self) -> None:
        self._refresh(ck.LOG_START_OFFSET_CHECKPOINT)

    def checkpoint_high_watermarks(self) -> None:
        self._refresh(ck.REPLICATION_OFFSET_CHECKPOINT)

    def checkpoint_cleaner_offsets(self) -> None:
        """cleaner-offset-checkpoint: the offsets set with :meth:`set_cleaner_offset`."""
        self._refresh(ck.CLEANER_OFFSET_CHECKPOINT)

    def checkpoint_all(self) -> None:
        """Every offset checkpoint with the loaded logs' offsets (a member: handed over)."""
        for name in OFFSET_CHECKPOINTS:
            self._refresh(name)

    def _write_all(self) -> None:
        if self.load:
            self.checkpoint_all()
            return
        for name in OFFSET_CHECKPOINTS:
            for state in self.dirs.values():
                self._write(state, name)

    # ------------------------------------------------------------------ delete and move
    def delete_log(self, topic: str, partition: int) -> Path | None:
        """Kafka's asyncDelete: close the log, rename its dir to ``<dir>.<uuid>-delete`` (which
        no start-up loads), forget its checkpoint entries; returns the renamed dir, for
        :meth:`remove_deleted` once the deletion is recorded elsewhere."""
        tp = (topic, partition)
        log = self.logs.pop(tp, None)
        if log is None:
            # a partition of an offline dir: forgotten here (its files are out of reach)
            self.offline_partitions.discard(tp)
            return None
        d = self._log_dir_of.pop(tp)
        log.close()
        target = _suffixed(log.dir, DELETE_DIR_SUFFIX)
        fileops.rename(log.dir, target)
        state = self.dirs[d]
        for name in OFFSET_CHECKPOINTS:
            state.checkpoints[name].pop(tp, None)
        for name in OFFSET_CHECKPOINTS:
            # now, as Kafka's asyncDelete does: a topic created again under the same name must
            # not meet this one's recovery point after a crash
            self._write(state, name)
        return target

    def move_aside_stray(self, path: Path, tp: TopicPartition, why: str) -> Path | None:
        """KRaft's stray replica (LogManager.findStrayReplicas, asyncDelete with isStray): a
        partition dir whose log is not the metadata's (``why``) is renamed to
        ``<dir>.<uuid>-stray`` and kept, never served nor loaded as the partition again; its
        checkpoint entries are forgotten.  ``path`` is not open here, or its log was released
        (a broker of several processes: the first sets aside the others' before they start).
        Read-only: nothing renamed, the partition is just not served.  Returns the new dir."""
        target = None
        if self.writable:
            target = _suffixed(path, STRAY_DIR_SUFFIX)
            fileops.rename(path, target)
            fileops.fsync_dir(path.parent)
            state = self.dirs[path.parent]
            changed = [
                name for name in OFFSET_CHECKPOINTS if state.checkpoints[name].pop(tp, None) is not None
            ]
            for name in changed:
                self._write(state, name)
        self.moved_aside.append((tp, path, target or path, why))
        return target

    def move_aside_or_fail(self, path: Path, tp: TopicPartition, why: str) -> None:
        """Start-up: :meth:`move_aside_stray`, and if the rename meets an I/O error the dir is
        offline from the start, as a load error there (UnifiedLog.renameDir's
        maybeHandleIOException: "Error while renaming dir for T-P in log dir D")."""
        try:
            self.move_aside_stray(path, tp, why)
        except OSError as exc:
            d = path.parent
            self.fail_at_start(d, f"Error while renaming dir for {tp[0]}-{tp[1]} in log dir {d}: {exc}")

    def set_aside_loaded(self, tp: TopicPartition, why: str) -> None:
        """Start-up: a loaded log found a stray once the metadata adopted its topic (logs of one
        topic with different topic ids) is let go of and set aside (:meth:`move_aside_or_fail`)."""
        log = self.logs.pop(tp, None)
        if log is None:
            return  # its dir failed at start (a rename before it)
        self._log_dir_of.pop(tp)
        log.release()
        self.move_aside_or_fail(log.dir, tp, why)

    @staticmethod
    def remove_deleted(paths: list[Path]) -> None:
        for path in paths:
            shutil.rmtree(path, ignore_errors=True)

    def new_future_dir(self, tp: TopicPartition, dest_dir: Path) -> Path:
        """The ``topic-partition.<uuid>-future`` dir a move to ``dest_dir`` copies into."""
        future = _suffixed(Path(dest_dir) / f"{tp[0]}-{tp[1]}", FUTURE_DIR_SUFFIX)
        fileops.mkdir(future)
        return future

    def drop_future(self, tp: TopicPartition, future: Path | None = None) -> None:
        """Abandon a move: the future dir (of this run, or a stale one found at start-up) goes."""
        stale = self.future_logs.pop(tp, None)
        if stale is not None:
            stale.close()
            shutil.rmtree(stale.dir, ignore_errors=True)
        if future is not None:
            shutil.rmtree(future, ignore_errors=True)

    def replace_with_future(
        self, tp: TopicPartition, future: Path, dest_dir: Path, copy_rest: Callable[[Path, Path], None]
    ) -> Log:
        """Finish a move (Kafka's replaceCurrentWithFutureLog): close the log, let ``copy_rest``
        bring the future dir up to date, rename it to the partition's name in ``dest_dir``,
        rename the old dir to ``-delete`` and remove it, reopen the log in its new home and
        move its checkpoint entries with it.  If anything fails before the rename the log is
        reopened where it was."""
        lg = self.logs[tp]
        old_dir, old_home = lg.dir, self._log_dir_of[tp]
        dest_dir = Path(dest_dir)
        lg.close()
        try:
            copy_rest(old_dir, future)
            fileops.fsync_dir(future)
            final = dest_dir / old_dir.name
            fileops.rename(future, final)
        except BaseException:
            self._reopen(tp, old_dir, old_home, lg)
            raise
        doomed = _suffixed(old_dir, DELETE_DIR_SUFFIX)
        fileops.rename(old_dir, doomed)
        new = self._reopen(tp, final, dest_dir, lg)
        src, dst = self.dirs[old_home], self.dirs[dest_dir]
        for name in OFFSET_CHECKPOINTS:
            v = src.checkpoints[name].pop(tp, None)
            if v is not None:
                dst.checkpoints[name][tp] = v
        self._record(dst, tp, new, hw=True)
        for name in OFFSET_CHECKPOINTS:
            self._write(src, name)
            self._write(dst, name)
        shutil.rmtree(doomed, ignore_errors=True)
        return new

    def _reopen(self, tp: TopicPartition, path: Path, home: Path, old: Log) -> Log:
        lg = Log(
            path,
            self.topic_configs.get(tp[0], old.config),  # a topic refused since: its log's own
            log_start_offset=old.log_start_offset,
            recovery_point=old.log_end_offset,
            had_clean_shutdown=True,
            writable=self.writable,
            clock=self.clock,
        )
        lg.update_high_watermark(old.high_watermark)
        self.logs[tp] = lg
        self._log_dir_of[tp] = home
        return lg

    # ------------------------------------------------------------------ shutdown
    def shutdown(self, *, success: bool = True) -> None:
        """Broker mode: close every log, write every checkpoint and the clean-shutdown marker.
        Tool mode: close what is still open, write the checkpoint entries the run changed
        and, when it succeeded, put back the marker it removed."""
        if self._closed:
            return
        self._closed = True
        self.checkpoint_writer = None  # the last checkpoints are written here, now
        try:
            if self.load or success:
                for tp in list(self.logs):
                    if self.load:
                        self._close_or_fail(tp)
                    else:
                        self.close_log(tp)
                for log in [*self.future_logs.values(), *self.stray_logs.values()]:
                    log.close()
            else:
                for log in [*self.logs.values(), *self.future_logs.values(), *self.stray_logs.values()]:
                    log.release()
            if self.writable:
                try:
                    self._write_all()
                except Exception:
                    if success:
                        raise
                for d, state in self.dirs.items():
                    if self.member:
                        continue  # the marker is the process's that holds the lock
                    if self.load and state.fully_loaded and self.members_clean:
                        fileops.atomic_write(
                            d / ck.CLEAN_SHUTDOWN_FILE, ck.encode_clean_shutdown(self.broker_epoch)
                        )
                        self.marked.append(d)
                    elif not self.load and success and state.marker_removed is not None:
                        fileops.atomic_write(d / ck.CLEAN_SHUTDOWN_FILE, state.marker_removed)
        finally:
            if self.writable and (not self.member or self._adopted):
                for d in self.dirs:
                    lock.release(d)  # a member holds none, unless it adopted them

    def _close_or_fail(self, tp: TopicPartition) -> None:
        """Broker mode's shutdown of one log: an I/O error takes its dir offline (no marker, no
        checkpoints there; the next start recovers it) instead of stopping the shutdown of
        the other dirs."""
        lg = self.logs.get(tp)
        if lg is None:
            return  # its dir went offline with an earlier log of it
        try:
            lg.close()
        except OSError as exc:
            if not self.writable or isinstance(exc, LogDirOfflineError):
                raise
            d = self._log_dir_of[tp]
            state = self.dirs[d]
            if state.offline is None:
                state.offline = f"Error while closing log for {tp[0]}-{tp[1]} in dir {d}: {exc}"
            with contextlib.suppress(OSError):
                lg.release()
            self.take_offline(d)

    def adopt_locks(self) -> bool:
        """Member mode, once the process that held the dirs' locks is gone: take them, so that
        no new broker opens the dirs while this one closes its logs (True); False, holding
        none, when another process has one already (this one must not write again)."""
        taken = []
        for d in self.dirs:
            try:
                lock.acquire(d)
            except OSError:
                for t in taken:
                    lock.release(t)
                return False
            taken.append(d)
        self._adopted = True
        return True

    def close(self) -> None:
        self.shutdown()

    def _abort(self) -> None:
        for log in [*self.logs.values(), *self.future_logs.values(), *self.stray_logs.values()]:
            try:
                log.release()
            except OSError:
                pass
        if self.writable and (not self.member or self._adopted):
            for d in self.dirs:
                lock.release(d)
        self._closed = True

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.shutdown(success=exc_type is None)
