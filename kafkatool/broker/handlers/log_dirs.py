"""DescribeLogDirs (35) and AlterReplicaLogDirs (34): moving a partition between this broker's
log dirs the way Kafka does, through a ``topic-partition.<uuid>-future`` dir.

AlterReplicaLogDirs answers at once and starts a move in the background: the
files of the partition are copied into the future dir in the destination while
the partition keeps serving (sealed segments whole, the active segment's log up
to its current size), throttled as Kafka throttles its future replica's fetches:
``replica.alter.log.dirs.io.max.bytes.per.second`` (the broker's own dynamic value)
bounds a ReplicationQuotaManager's rate (broker/replication_quota.py), a step of
``replica.fetch.max.bytes`` at a time, none while the rate is over it.  Then, in one step of the event
loop (no request runs in between), the log is closed cleanly, whatever changed
since is copied (the tail appended to the active segment, rewritten indexes and
checkpoints, segments the cleaner replaced), the future dir takes the partition's
name, the old dir becomes ``...-delete`` and is removed, and the log is reopened
from its new home.  Until then DescribeLogDirs shows the future replica
(``is_future_key``) in its destination dir.

A crash mid-copy leaves a ``-future`` dir that the next start ignores; a crash
between the two renames leaves the partition in both dirs, which the log
manager refuses to load (naming both) rather than losing either.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.broker.replication_quota import ReplicationQuota
from kafkatool.log.log import Log
from kafkatool.log.manager import log_end_offset_lag
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated import AlterReplicaLogDirsResponse, DescribeLogDirsResponse
from kafkatool.protocol.generated.alter_replica_log_dirs_response import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirTopicResult,
)
from kafkatool.protocol.generated.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)

log = logging.getLogger("kafkatool.broker")

ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS = 34, 35
THROTTLE_CONFIG = "replica.alter.log.dirs.io.max.bytes.per.second"
CHUNK = 1 << 20
#: what only a write can answer: a move that meets one failed in its destination dir
DEST_FAILURES = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)

TopicPartition = tuple[str, int]


@dataclass
class LogDirMove:
    tp: TopicPartition
    dest_dir: Path
    future: Path
    #: file name -> (inode, size) copied into the future dir
    copied: dict[str, tuple[int, int]] = field(default_factory=dict)
    bytes_copied: int = 0
    task: asyncio.Task | None = None


def moves(broker) -> dict[TopicPartition, LogDirMove]:
    table = getattr(broker, "log_dir_moves", None)
    if table is None:
        table = broker.log_dir_moves = {}
    return table


def move_quota(broker) -> ReplicationQuota:
    """QuotaFactory's ``alterLogDirs``: the ReplicationQuotaManager of every move of this broker
    (its own dynamic replica.alter.log.dirs.io.max.bytes.per.second over
    alter.log.dirs.replication.quota.window.num x .window.size.seconds)."""
    quota = getattr(broker, "log_dir_move_quota", None)
    if quota is None:
        cfg = broker.config
        quota = broker.log_dir_move_quota = ReplicationQuota(
            cfg,
            THROTTLE_CONFIG,
            cfg.int("alter.log.dirs.replication.quota.window.num"),
            cfg.int("alter.log.dirs.replication.quota.window.size.seconds"),
        )
    return quota


def _same_dir(a: Path, b: Path) -> bool:
    return os.path.normpath(os.path.abspath(a)) == os.path.normpath(os.path.abspath(b))


def _find_dir(broker, path: str) -> Path | None:
    for d in broker.manager.dirs:
        if _same_dir(d, Path(path)):
            return d
    return None


# ---------------------------------------------------------------- copying


def _copy_sync(src: Path, dst: Path, start: int, end: int | None) -> int:
    """Copy bytes [start, end) of src into dst at the same position (dst cut to ``start`` first)."""
    copied = 0
    with open(src, "rb") as fin, open(dst, "r+b" if start else "wb") as fout:
        fout.truncate(start)
        fin.seek(start)
        fout.seek(start)
        left = None if end is None else end - start
        while left is None or left > 0:
            chunk = fin.read(CHUNK if left is None else min(CHUNK, left))
            if not chunk:
                break
            fout.write(chunk)
            copied += len(chunk)
            if left is not None:
                left -= len(chunk)
        fout.flush()
        os.fsync(fout.fileno())
    return copied


async def _copy_throttled(broker, mv: LogDirMove, src: Path, dst: Path, end: int) -> None:
    """As ReplicaAlterLogDirsThread fetches for the future replica: no step while the move quota
    is exceeded (LocalLeaderEndPoint.buildFetch; the thread backs off replica.fetch.backoff.ms),
    else up to replica.fetch.max.bytes (its fetch size), recorded (processPartitionData)."""
    quota = move_quota(broker)
    step = max(1, broker.config.int("replica.fetch.max.bytes"))
    backoff = broker.config.int("replica.fetch.backoff.ms") / 1000.0
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        left = end
        while left > 0:
            while quota.exceeded():
                await asyncio.sleep(backoff)
            chunk = fin.read(min(step, left))
            if not chunk:
                break
            fout.write(chunk)
            left -= len(chunk)
            mv.bytes_copied += len(chunk)
            quota.record(len(chunk))
            await asyncio.sleep(0)
        fout.flush()
        os.fsync(fout.fileno())


async def _precopy(broker, mv: LogDirMove) -> None:
    """Copy what will not change (sealed segments, the active log's current bytes) while serving."""
    lg = broker.get_log(*mv.tp)
    if lg is None:
        raise FileNotFoundError(f"partition {mv.tp[0]}-{mv.tp[1]} is gone")
    active = lg.active_segment
    active_prefix = active.log_path.name.rsplit(".", 1)[0] + "."
    for name in sorted(os.listdir(lg.dir)):
        src = lg.dir / name
        is_active_log = src == active.log_path
        if name.startswith(active_prefix) and not is_active_log:
            continue  # the active segment's indexes are rewritten at close
        if not name.endswith((".log", ".index", ".timeindex", ".txnindex")):
            continue  # checkpoints and snapshots: small, copied at the switch
        try:
            st = os.stat(src)
        except FileNotFoundError:
            continue  # deleted by retention meanwhile
        if is_active_log:
            active.wait_written()  # its queued appends (log/append_writer.py) in the file first
        size = active.size if is_active_log else st.st_size
        await _copy_throttled(broker, mv, src, mv.future / name, size)
        mv.copied[name] = (st.st_ino, size)
        if broker.get_log(*mv.tp) is not lg:
            raise FileNotFoundError(f"partition {mv.tp[0]}-{mv.tp[1]} was deleted or moved meanwhile")


def _switch(broker, mv: LogDirMove) -> Log:
    """Close, copy the rest, rename, reopen (the log manager's replace_with_future):
    synchronous, so nothing runs in between."""

    def copy_rest(old_dir: Path, future: Path) -> None:
        names = [n for n in sorted(os.listdir(old_dir)) if (old_dir / n).is_file()]
        for name in names:
            src, dst = old_dir / name, future / name
            st = os.stat(src)
            prev = mv.copied.get(name)
            if prev == (st.st_ino, st.st_size):
                continue
            if prev is not None and name.endswith(".log") and prev[0] == st.st_ino and st.st_size >= prev[1]:
                mv.bytes_copied += _copy_sync(src, dst, prev[1], None)  # appended since
            else:
                mv.bytes_copied += _copy_sync(src, dst, 0, None)
        for name in os.listdir(future):
            if name not in names:
                os.unlink(future / name)  # deleted by retention or replaced by the cleaner

    try:
        new = broker.manager.replace_with_future(mv.tp, mv.future, mv.dest_dir, copy_rest)
    except BaseException:
        lg = broker.get_log(*mv.tp)
        if lg is not None:
            broker._attach(lg)  # reopened where it was
        raise
    broker._attach(new)
    broker.wake(mv.tp)
    return new


async def _run(broker, mv: LogDirMove) -> None:
    table = moves(broker)
    try:
        await _precopy(broker, mv)
        new = _switch(broker, mv)
        log.info(
            "log dir move done topic=%s partition=%d dir=%s bytes=%d leo=%d",
            mv.tp[0],
            mv.tp[1],
            mv.dest_dir,
            mv.bytes_copied,
            new.log_end_offset,
        )
    except asyncio.CancelledError:
        broker.manager.drop_future(mv.tp, mv.future)
        raise
    except OSError as exc:
        if exc.errno in DEST_FAILURES:
            # only the copy writes (into the future dir): the destination's disk refused it, and
            # it fails as a whole, as the future log's append in ReplicaAlterLogDirsThread does
            broker.report_io_error(
                mv.dest_dir, f"Error while copying {mv.tp[0]}-{mv.tp[1]} into dir {mv.dest_dir}", exc
            )
        else:
            log.error(
                "log dir move failed topic=%s partition=%d dir=%s error=%s",
                mv.tp[0],
                mv.tp[1],
                mv.dest_dir,
                exc,
            )
        if mv.dest_dir not in broker.manager.offline_dirs:
            broker.manager.drop_future(mv.tp, mv.future)  # an offline dir is left as it is
    except Exception:
        log.exception("log dir move failed topic=%s partition=%d dir=%s", mv.tp[0], mv.tp[1], mv.dest_dir)
        broker.manager.drop_future(mv.tp, mv.future)
    finally:
        if table.get(mv.tp) is mv:
            del table[mv.tp]


def _cancel(broker, tp: TopicPartition) -> None:
    mv = moves(broker).pop(tp, None)
    if mv is not None and mv.task is not None:
        mv.task.cancel()
    broker.manager.drop_future(tp)  # a future dir left by an earlier run


def start_move(broker, tp: TopicPartition, path: str) -> int:
    """Error code of one partition of AlterReplicaLogDirs."""
    dest = _find_dir(broker, path)
    if dest is None:
        return ErrorCode.LOG_DIR_NOT_FOUND
    t = broker.topic(tp[0])
    lg = broker.get_log(*tp)
    if dest in broker.manager.offline_dirs or (lg is None and tp in broker.manager.offline_partitions):
        return ErrorCode.KAFKA_STORAGE_ERROR  # ReplicaManager.alterReplicaLogDirs: an offline dir
    if t is None or not 0 <= tp[1] < t.partitions or lg is None:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    if broker.read_only:
        return ErrorCode.KAFKA_STORAGE_ERROR
    current = moves(broker).get(tp)
    if _same_dir(broker.manager.log_dir_of(*tp), dest):
        _cancel(broker, tp)  # pinning a replica to where it is cancels a move elsewhere
        return ErrorCode.NONE
    if current is not None and _same_dir(current.dest_dir, dest):
        return ErrorCode.NONE
    _cancel(broker, tp)
    mv = LogDirMove(tp, dest, broker.manager.new_future_dir(tp, dest))
    moves(broker)[tp] = mv
    mv.task = asyncio.ensure_future(_run(broker, mv))
    log.info("log dir move started topic=%s partition=%d dir=%s", tp[0], tp[1], dest)
    return ErrorCode.NONE


# ---------------------------------------------------------------- handlers


def handle_alter_replica_log_dirs(ctx, req):
    broker = ctx.broker
    results: dict[str, list] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                code = start_move(broker, (t.name, p), d.path)
                results.setdefault(t.name, []).append(
                    AlterReplicaLogDirPartitionResult(partition_index=p, error_code=int(code))
                )
    return AlterReplicaLogDirsResponse(
        throttle_time_ms=0,
        results=[AlterReplicaLogDirTopicResult(topic_name=n, partitions=ps) for n, ps in results.items()],
    )


def _future_end(lg: Log, mv: LogDirMove) -> int:
    """Where the future replica's log ends: at the first segment not copied whole yet."""
    for seg in lg.segments:
        if seg.log_path.name not in mv.copied:
            return seg.base_offset
    return lg.log_end_offset


def handle_describe_log_dirs(ctx, req):
    """Every log dir with the (requested) partitions it holds, and the future replicas of moves."""
    broker = ctx.broker
    manager = broker.manager
    wanted = None
    if req.topics is not None:
        wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
    by_dir: dict[Path, dict[str, list]] = {d: {} for d in manager.dirs}
    for tp, lg in sorted(manager.logs.items()):
        if wanted is not None and tp not in wanted:
            continue
        by_dir.setdefault(manager.log_dir_of(*tp), {}).setdefault(tp[0], []).append(
            DescribeLogDirsPartition(
                partition_index=tp[1],
                partition_size=lg.size,
                offset_lag=log_end_offset_lag(lg, lg.log_end_offset, False),
                is_future_key=False,
            )
        )
    for tp, mv in sorted(moves(broker).items()):
        lg = broker.get_log(*tp)
        if lg is None or (wanted is not None and tp not in wanted):
            continue
        by_dir.setdefault(mv.dest_dir, {}).setdefault(tp[0], []).append(
            DescribeLogDirsPartition(
                partition_index=tp[1],
                partition_size=mv.bytes_copied,
                offset_lag=log_end_offset_lag(lg, _future_end(lg, mv), True),
                is_future_key=True,
            )
        )
    results = []
    offline = manager.offline_dirs
    for d, topics in by_dir.items():
        if d in offline:
            # ReplicaManager.describeLogDirs: an offline dir answers KAFKA_STORAGE_ERROR alone
            results.append(
                DescribeLogDirsResult(
                    error_code=ErrorCode.KAFKA_STORAGE_ERROR,
                    log_dir=str(d),
                    topics=[],
                    total_bytes=-1,
                    usable_bytes=-1,
                )
            )
            continue
        total = usable = -1
        try:
            usage = shutil.disk_usage(d)
            total, usable = usage.total, usage.free
        except OSError:
            pass
        results.append(
            DescribeLogDirsResult(
                error_code=0,
                log_dir=str(d),
                topics=[DescribeLogDirsTopic(name=n, partitions=ps) for n, ps in sorted(topics.items())],
                total_bytes=total,
                usable_bytes=usable,
            )
        )
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)


def register(router) -> None:
    router.register(ALTER_REPLICA_LOG_DIRS, 0, 2, handle_alter_replica_log_dirs)
    router.register(DESCRIBE_LOG_DIRS, 0, 4, handle_describe_log_dirs)
