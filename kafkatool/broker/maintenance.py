"""Retention and compaction in the broker, with the engine the offline tools use.

* Retention (``log.retention.check.interval.ms``, default 5 min): Kafka's
  ``deleteOldSegments`` via :func:`kafkatool.log.retention.plan_retention` /
  ``apply_retention``, per log with its topic config.  When even the active
  segment breaches retention, the broker rolls first so it can go, as Kafka does.
* Compaction (``log.cleaner.enable``, every ``log.cleaner.backoff.ms``): for
  logs with ``cleanup.policy`` containing ``compact`` whose dirty ratio reached
  ``min.cleanable.dirty.ratio`` (or whose dirty data is older than
  ``max.compaction.lag.ms``), the filthiest log is cleaned by the engine's round
  (:func:`kafkatool.log.cleaner.clean_round_files` in the cleaner's worker process,
  then :func:`~kafkatool.log.cleaner.install_cleaned` under the log's lock: the
  pieces :func:`kafkatool.log.cleaner.compact` runs in one process); the cleaner
  offsets persist in each log dir's ``cleaner-offset-checkpoint``.

Neither runs on the event loop (broker/background.py ``Workers``): a retention pass
runs on the scheduler thread, the event loop then writes the log-start checkpoint and
wakes long polls; a cleaner pass picks the filthiest log on the cleaner thread, runs
one round (Kafka's doClean) in the worker process, which writes ``.cleaned`` segments
from the inactive segments, and swaps them in under the log's lock; the event loop
then writes the cleaner checkpoint.  One log per cleaner pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

log = logging.getLogger("kafkatool.broker.maintenance")


def _now_ms() -> int:
    return int(time.time() * 1000)


def retention_pass(logs, now_ms: int | None = None, report_io_error=None) -> list[tuple]:
    """Retention over ``logs`` ((topic, partition), Log) on a worker thread (each change
    under the log's lock); returns (tp, segments, bytes, reason, log start offset) per log
    that changed, for the event loop to checkpoint, wake and report.  An I/O error of one log
    goes to ``report_io_error`` (Broker.report_io_error: its dir goes offline) and the pass
    goes on with the others (without one, it is raised)."""
    from kafkatool.log.manager import log_error_message
    from kafkatool.log.retention import apply_retention, plan_retention

    now = _now_ms() if now_ms is None else now_ms
    done = []
    for tp, lg in logs:
        if lg.closed:
            continue
        cfg = lg.config
        try:
            plan = plan_retention(lg, cfg, now_ms=now)
            if any("would roll a new segment" in n for n in plan.notes) and lg.active_segment.size > 0:
                lg.roll()
                plan = plan_retention(lg, cfg, now_ms=now)
            if not plan.deletions:
                continue
            res = apply_retention(lg, plan, quarantine=None)
        except OSError as exc:
            if report_io_error is None:
                raise
            report_io_error(lg.dir, log_error_message(lg, "deleting segments for"), exc)
            continue
        done.append(
            (tp, len(res.deleted), plan.bytes_deleted, plan.deletions[-1].reason, lg.log_start_offset)
        )
    return done


def finish_retention(broker, done: list[tuple]) -> int:
    """The event loop's part of a retention pass; returns the number of segments deleted."""
    deleted = 0
    for (topic, part), segments, bytes_deleted, reason, log_start in done:
        deleted += segments
        broker.wake((topic, part))
        log.info(
            "retention deleted topic=%s partition=%d segments=%d bytes=%d reason=%s log_start_offset=%d",
            topic,
            part,
            segments,
            bytes_deleted,
            reason,
            log_start,
        )
    if done and broker.manager is not None:
        broker.manager.checkpoint_log_start_offsets()
    return deleted


def run_retention(broker, now_ms: int | None = None) -> int:
    """One retention pass over every log, in the calling thread; returns the number of segments deleted."""
    logs = list(broker.manager.logs.items())
    return finish_retention(broker, retention_pass(logs, now_ms, broker.report_io_error))


class CleanerState:
    """The broker's cleaner; its offsets are the log manager's cleaner-offset-checkpoint."""

    def __init__(self, broker):
        from kafkatool.broker.config import cleaner_io_rate
        from kafkatool.log.throttle import Throttler

        self.broker = broker
        #: log.cleaner.io.max.bytes.per.second: the cleaner's one throttler (Kafka's
        #: LogCleaner.throttler), for every round of every partition; a round takes a copy to
        #: the worker process and its accounting comes back (log/throttle.py)
        self.throttler = Throttler(cleaner_io_rate(broker.config.get("log.cleaner.io.max.bytes.per.second")))
        #: tp -> the Log whose data stopped a round (Kafka's markPartitionUncleanable: the
        #: cleaner skips it until the log goes; a recreated topic is a new Log)
        self.uncleanable: dict = {}
        #: the last pass's greatest cleanable ratio of a compacted log with data, due or not
        #: (LogCleanerManager.dirtiestLogCleanableRatio: its max-dirty-percent gauge)
        self.max_dirty_ratio = 0.0
        #: the last round that ran: (seconds, bytes read, bytes written) of the segments it
        #: cleaned (the cleaner thread's lastStats: max-clean-time-secs, cleaner-recopy-percent);
        #: one tuple, replaced whole, so another thread reads it in one step
        self.last_stats: tuple[float, int, int] = (0.0, 0, 0)

    def save(self) -> None:
        self.broker.manager.checkpoint_cleaner_offsets()

    def clean_filthiest(self, logs, checkpoints: dict, now_ms: int | None = None):
        """The cleaner thread's part: pick the filthiest due log of ``logs`` ((tp, Log)), run
        one round in the worker process, swap the ``.cleaned`` segments in under the log's
        lock.  Returns None when no log was due, else (tp, Log, its CompactionResult: the new
        checkpoint, None when a swap was voided; the error of a failed round, seconds).
        ``log.cleaner.io.max.bytes.per.second`` is read at every round and given to the one
        throttler (Kafka's reconfigure: updateDesiredRatePerSec, the interval's accounting
        kept), so a dynamic change applies from the next round."""
        from kafkatool.broker.background import WorkersStopped
        from kafkatool.broker.config import cleaner_io_rate
        from kafkatool.log.cleaner import (
            CompactionResult,
            UnreadableBatchError,
            clean_round_files,
            cleanable_offsets,
            cleaning_failed,
            discard_cleaned_files,
            inactive_segments_below,
            install_cleaned,
        )
        from kafkatool.log.offset_map import BYTES_PER_ENTRY

        now = _now_ms() if now_ms is None else now_ms
        cfg = self.broker.config
        best = None
        dirtiest = 0.0
        for tp, lg in logs:
            if not lg.config.compact or lg.closed or self.uncleanable.get(tp) is lg:
                continue
            with lg.lock:
                rng = cleanable_offsets(lg, lg.config, checkpoints.get(tp), now)
            if rng.clean_bytes + rng.cleanable_bytes > 0:
                dirtiest = max(dirtiest, rng.dirty_ratio)
            if rng.not_due_reason(lg.config) is None and (
                best is None or rng.dirty_ratio > best[2].dirty_ratio
            ):
                best = (tp, lg, rng)
        self.max_dirty_ratio = dirtiest
        if best is None:
            return None
        tp, lg, rng = best
        t0 = time.monotonic()
        with lg.lock:
            before = inactive_segments_below(lg, rng.first_uncleanable)
            last_records = {
                pid: (e.last_offset, e.producer_epoch) for pid, e in lg.producer_state.producers.items()
            }
            log_start = lg.log_start_offset
        map_bytes = cfg.int("log.cleaner.dedupe.buffer.size") // max(cfg.int("log.cleaner.threads"), 1)
        io_rate = cleaner_io_rate(cfg.get("log.cleaner.io.max.bytes.per.second"))
        if self.throttler.update_rate(io_rate):
            log.info("Updating logCleanerIoMaxBytesPerSecond: %s", io_rate)
        workers = self.broker.workers
        result = CompactionResult(lg.dir, rng)
        try:
            try:
                rnd, groups, throttler = workers.run_in_process(
                    clean_round_files,
                    dir=str(lg.dir),
                    config=lg.config,
                    log_start_offset=log_start,
                    first_dirty=rng.first_dirty,
                    first_uncleanable=rng.first_uncleanable,
                    last_records=last_records,
                    now_ms=now,
                    map_bytes=max(map_bytes, BYTES_PER_ENTRY),
                    load_factor=float(cfg.get("log.cleaner.io.buffer.load.factor")),
                    throttler=self.throttler,
                )
            except Exception as exc:
                if getattr(exc, "throttler", None) is not None:
                    self.throttler.adopt(exc.throttler)  # a failed round's bytes count too
                if not isinstance(exc, UnreadableBatchError):
                    raise
                # as Kafka's round: the groups finished before the bad batch are swapped in
                # (the worker removed the .cleaned files of the group it was writing)
                for g in getattr(exc, "cleaned_groups", ()):
                    install_cleaned(lg, g, before)
                raise
            self.throttler.adopt(throttler)
            installed = True
            for g in groups:
                # a stop between two swaps ends the round there (Kafka's checkDone)
                workers.check_running()
                installed = install_cleaned(lg, g, before) and installed
        except WorkersStopped:
            # the broker stops mid-round and kills the worker process, which cannot remove
            # what it wrote; Kafka deletes an aborted round's .cleaned files
            # (LogCleaningAbortedException), so a clean shutdown leaves none
            workers.wait_stopped()
            discard_cleaned_files(lg.dir)
            raise
        except Exception as exc:
            # Kafka's CleanerThread: any exception out of a round (LogCleaningException) marks
            # the partition uncleanable, its checkpoint is written at the round's start, and
            # the other logs are cleaned as ever.  An I/O error also takes the log dir offline
            # (LogCleaner's "Failed to clean up log ... in dir": logDirFailureChannel), so no
            # partition of it is picked again; a file gone under the worker is retention or a
            # deletion that won the race (the round is void), not the disk
            if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError):
                msg = f"Failed to clean up log for {tp[0]}-{tp[1]} in dir {lg.dir.parent} due to IOException"
                self.broker.report_io_error(lg.dir, msg, exc)
            with contextlib.suppress(OSError):
                discard_cleaned_files(lg.dir)
            cleaning_failed(result, exc, rng.first_dirty)
            self.uncleanable[tp] = lg
            return tp, lg, result, time.monotonic() - t0
        result.rounds.append(rnd)
        result.stats.add(rnd.stats)
        self.last_stats = (time.monotonic() - t0, rnd.stats.bytes_before, rnd.stats.bytes_after)
        result.checkpoint_after = rnd.end_offset if installed else None
        return tp, lg, result, time.monotonic() - t0

    def finish(self, cleaned) -> None:
        """The event loop's part: the cleaner checkpoint, long polls, one log line."""
        tp, lg, result, seconds = cleaned
        mgr = self.broker.manager
        if mgr is None:
            return
        checkpoint = result.checkpoint_after
        if checkpoint is not None and mgr.logs.get(tp) is lg:  # not deleted or replaced meanwhile
            mgr.set_cleaner_offset(tp, checkpoint)
            self.save()
        self.broker.wake(tp)
        if result.error is not None:
            # one line naming what failed (file, batch offset and byte position for bad bytes)
            log.warning(
                "log cleaning stopped topic=%s partition=%d: %s; the partition is marked uncleanable "
                "checkpoint=%s",
                tp[0],
                tp[1],
                result.error,
                checkpoint,
            )
            return
        log.info(
            "log cleaned topic=%s partition=%d dirty_ratio=%.3f checkpoint=%s seconds=%.3f throttled_seconds=%.3f%s",
            tp[0],
            tp[1],
            result.range.dirty_ratio,
            checkpoint,
            seconds,
            result.stats.throttled_s,
            "" if checkpoint is not None else " (voided: the log changed meanwhile)",
        )

    def run_once(self, now_ms: int | None = None) -> bool:
        """One cleaner pass in the calling thread; True when a log was cleaned."""
        mgr = self.broker.manager
        logs = list(mgr.logs.items())
        cleaned = self.clean_filthiest(logs, {tp: mgr.cleaner_offset(tp) for tp, _ in logs}, now_ms)
        if cleaned is None:
            return False
        self.finish(cleaned)
        return True


async def _retention_loop(broker, interval: float) -> None:
    from kafkatool.broker.background import WorkersStopped

    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(interval)
        try:
            logs = list(broker.manager.logs.items())
            done = await loop.run_in_executor(
                broker.workers.scheduler, retention_pass, logs, None, broker.report_io_error
            )
            finish_retention(broker, done)
        except WorkersStopped:
            return
        except Exception as exc:
            _background_failure("retention pass", exc)


def _out_of_descriptors(exc: BaseException | None) -> OSError | None:
    """The EMFILE/ENFILE behind an exception (a worker pool wraps it), or None."""
    import errno

    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def _background_failure(what: str, exc: BaseException) -> None:
    """A failed background pass: one line when the process is out of descriptors (the pass
    runs again later), the traceback otherwise."""
    emfile = _out_of_descriptors(exc)
    if emfile is not None:
        log.warning("%s skipped: out of file descriptors (%s); it runs again later", what, emfile.strerror)
    else:
        log.error("%s failed", what, exc_info=exc)


async def _cleaner_loop(broker, backoff: float) -> None:
    from kafkatool.broker.background import WorkersStopped

    state = CleanerState(broker)
    broker.cleaner = state
    loop = asyncio.get_running_loop()
    while True:
        cleaned = None
        try:
            mgr = broker.manager
            logs = [(tp, lg) for tp, lg in mgr.logs.items() if lg.config.compact]
            checkpoints = {tp: mgr.cleaner_offset(tp) for tp, _ in logs}
            cleaned = await loop.run_in_executor(
                broker.workers.cleaner, state.clean_filthiest, logs, checkpoints
            )
            if cleaned is not None:
                state.finish(cleaned)
        except WorkersStopped:
            return
        except Exception as exc:
            _background_failure("cleaner pass", exc)
        # Kafka's doWork: the backoff after a pass that cleaned nothing or failed
        await asyncio.sleep(0 if cleaned is not None and cleaned[2].error is None else backoff)


def start(broker) -> list[asyncio.Task]:
    cfg = broker.config
    tasks = [asyncio.create_task(_retention_loop(broker, cfg.int("log.retention.check.interval.ms") / 1000))]
    if cfg.bool("log.cleaner.enable"):
        tasks.append(asyncio.create_task(_cleaner_loop(broker, cfg.int("log.cleaner.backoff.ms") / 1000)))
    return tasks
