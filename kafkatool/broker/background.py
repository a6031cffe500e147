"""Background work on Kafka's schedule: checkpoints, time-based flushes, retention, compaction.

Where it runs (:class:`Workers`; DESIGN.md "Background work off the event loop"): the
event loop only schedules.  I/O-bound work (retention deletes, fsyncs after a roll and
on ``flush.ms``, offset checkpoint files (the loop takes their snapshot), closing
segments whose ``file.delete.delay.ms`` passed) runs on one
scheduler thread, as Kafka's ``kafka-scheduler`` does; the cleaner has its own thread
(Kafka's ``kafka-log-cleaner-thread-0``) that picks a log and swaps the result in, while
the CPU-bound part of a cleaning round (key scans, re-encoding) runs in a worker process
(broker/worker_process.py) on the same files, so it never holds the interpreter lock the event loop needs.  The
log's own lock (``Log.lock``) orders these threads against the event loop's appends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import select
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from kafkatool.errors import KafkatoolError
from kafkatool.log.manager import log_error_message

log = logging.getLogger("kafkatool.broker.background")


def _now_ms() -> int:
    return int(time.time() * 1000)


class WorkersStopped(KafkatoolError):
    """The broker is shutting down: a background job gives up."""


class WorkerFailed(KafkatoolError):
    """The worker process died under a job (killed, out of memory)."""


class Workers:
    """The broker's background threads and its cleaner worker process (see the module doc)."""

    def __init__(self):
        self.scheduler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafka-scheduler")
        self.cleaner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafka-log-cleaner-thread")
        self._children: set[subprocess.Popen] = set()
        self._idle: list[subprocess.Popen] = []
        self._pool_lock = threading.Lock()
        self._stopping = threading.Event()
        #: called with (path, Kafka's "Error while ... in dir ..." line, error) for an I/O error
        #: of a log operation: the broker takes that log dir offline (Broker.report_io_error)
        self.on_io_error = lambda where, msg, exc: log.error("%s: %s", msg, exc)

    def submit(self, fn, *args, name: str = "background job") -> None:
        """Run ``fn(*args)`` on the scheduler thread; failures are logged, never raised."""

        def run() -> None:
            try:
                fn(*args)
            except Exception:
                log.exception("background task failed task=%s", name)

        if not self._stopping.is_set():
            self.scheduler.submit(run)

    def checkpoint_writer(self, manager):
        """What a LogManager calls with checkpoint snapshots (log/manager.CheckpointWrite): the
        files are written on the scheduler thread, as Kafka's kafka-scheduler runs its
        checkpoint tasks.  A failed write is one log line; the next checkpoint tries again."""

        def write(jobs) -> None:
            for job in jobs:
                try:
                    manager.write_checkpoint(job)
                except OSError as exc:
                    # Kafka's OffsetCheckpointFile.write: "Error while writing to checkpoint file"
                    path = job.state.path / job.name
                    self.on_io_error(path, f"Error while writing to checkpoint file {path}", exc)

        return lambda jobs: self.submit(write, jobs, name="checkpoint")

    def schedule_flush(self, lg, offset: int) -> None:
        """A Log's ``flush_scheduler`` after a roll: its fsync up to the new segment, on the
        scheduler."""
        self.submit(self.flush, lg, offset, name="flush-log")

    def flush(self, lg, offset: int | None = None) -> None:
        """A log's fsync (scheduler thread); an I/O error takes its dir offline (LocalLog.flush's
        maybeHandleIOException)."""
        try:
            lg.flush(offset)
        except OSError as exc:
            self.on_io_error(lg.dir, log_error_message(lg, "flushing log for"), exc)

    def run_in_process(self, fn, /, **kwargs):
        """Run ``fn(**kwargs)`` in a worker process (broker/worker_process.py) and wait (from a
        worker thread, never the event loop); raises WorkersStopped when the broker stops
        meanwhile, WorkerFailed when the process dies under the job."""
        with self._pool_lock:
            if self._stopping.is_set():
                raise WorkersStopped()
            child = self._idle.pop() if self._idle else self._spawn()
        try:
            ok, value = self._call(child, fn, kwargs)
        except BaseException:
            self._discard(child)
            raise
        with self._pool_lock:
            stopping = self._stopping.is_set()
            if not stopping:
                self._idle.append(child)
        if stopping:
            # the job answered while the broker began to stop: its result is dropped (a
            # cleaning round's .cleaned files are then removed by its caller), as Kafka's
            # cleaner drops a round at its next checkDone.  Outside the pool lock: _discard
            # takes it (taking it twice here hung the cleaner thread and so the stop)
            self._discard(child)
            raise WorkersStopped()
        if not ok:
            raise value
        return value

    def check_running(self) -> None:
        """Raise WorkersStopped once a stop began (Kafka's CleanerThread.checkDone: a job
        between its steps gives up instead of holding the stop up)."""
        if self._stopping.is_set():
            raise WorkersStopped()

    def _spawn(self) -> subprocess.Popen:
        child = subprocess.Popen(
            [sys.executable, "-m", "kafkatool.broker.worker_process", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
        )
        self._children.add(child)
        return child

    def _call(self, child: subprocess.Popen, fn, kwargs):
        try:
            child.stdin.write(pickle.dumps((fn, kwargs)))
            child.stdin.flush()
            while not select.select([child.stdout], [], [], 0.2)[0]:
                if self._stopping.is_set():
                    raise WorkersStopped()
            return pickle.load(child.stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            if self._stopping.is_set():
                raise WorkersStopped() from None
            raise WorkerFailed(f"the worker process (pid {child.pid}) died under the job: {exc}") from None

    def _discard(self, child: subprocess.Popen) -> None:
        if child.poll() is None:
            child.kill()
        child.wait()
        for f in (child.stdin, child.stdout):
            with contextlib.suppress(OSError):
                f.close()
        with self._pool_lock:
            self._children.discard(child)
            if child in self._idle:
                self._idle.remove(child)

    def wait_stopped(self) -> None:
        """Return once a stop in progress has killed the worker processes (their files are
        then safe to remove)."""
        with self._pool_lock:
            pass

    def shutdown(self) -> None:
        """Stop: kill the worker processes (the cleaner thread then removes the ``.cleaned``
        files of the round it ran), let the threads finish their current job."""
        self._stopping.set()
        with self._pool_lock:
            for child in list(self._children):
                if child.poll() is None:
                    child.kill()
                child.wait()
            self._children.clear()
            self._idle.clear()
        self.cleaner.shutdown(wait=True, cancel_futures=True)
        self.scheduler.shutdown(wait=True, cancel_futures=True)


async def _every(seconds: float, fn, name: str, executor=None, first: float | None = None) -> None:
    """Run ``fn`` every ``seconds`` (the first time after ``first``, default ``seconds``)."""
    loop = asyncio.get_running_loop()
    delay = seconds if first is None else first
    while True:
        await asyncio.sleep(delay)
        delay = seconds
        try:
            if executor is None:
                fn()
            else:
                await loop.run_in_executor(executor, fn)
        except Exception:
            log.exception("background task failed task=%s", name)


def _checkpoint_hw(broker) -> None:
    if broker.manager is not None:
        broker.manager.checkpoint_high_watermarks()


def _checkpoint_recovery(broker) -> None:
    if broker.manager is not None:
        broker.manager.checkpoint_recovery_points()


def _checkpoint_start(broker) -> None:
    if broker.manager is not None:
        broker.manager.checkpoint_log_start_offsets()


def _flush_due(broker) -> None:
    """Kafka's flushDirtyLogs: flush each log whose flush.ms passed since its last flush."""
    if broker.manager is None:
        return
    now = _now_ms()
    last = broker.__dict__.setdefault("_last_flush", {})
    for tp, lg in list(broker.manager.logs.items()):
        if lg.config.flush_ms >= 2**62:
            continue
        if now - last.get(tp, 0) >= lg.config.flush_ms and lg.log_end_offset > lg.recovery_point:
            broker.workers.flush(lg)
            last[tp] = now


def _close_retired(broker) -> None:
    """Close and delete the segments whose ``file.delete.delay.ms`` passed (scheduler thread)."""
    if broker.manager is None:
        return
    now = _now_ms()
    for lg in list(broker.manager.logs.values()):
        if lg.has_retired:
            try:
                lg.close_retired(now)
            except OSError as exc:
                broker.report_log_error(lg, "deleting segments for", exc)


def _close_idle(broker) -> None:
    """Kafka's connections.max.idle.ms: close connections that sent nothing for that long
    (a connection waiting for a parked response is not idle)."""
    limit = broker.config.int("connections.max.idle.ms") / 1000
    now = time.monotonic()
    for conn in list(broker._connections):
        if not conn.queue and now - conn.last_active > limit:
            log.info("closing idle connection peer=%s idle_s=%.0f", conn.peer, now - conn.last_active)
            conn.abort()


def start_background(broker) -> list[asyncio.Task]:
    cfg = broker.config
    idle_ms = cfg.int("connections.max.idle.ms")
    idle = []
    if idle_ms >= 0:
        every = max(idle_ms / 10000, 0.05)
        idle.append(asyncio.create_task(_every(every, lambda: _close_idle(broker), "idle-connections")))
    if broker.read_only:
        return idle
    tasks = idle + [
        asyncio.create_task(
            _every(
                cfg.int("replica.high.watermark.checkpoint.interval.ms") / 1000,
                lambda: _checkpoint_hw(broker),
                "hw-checkpoint",
            )
        ),
        asyncio.create_task(
            _every(
                cfg.int("log.flush.offset.checkpoint.interval.ms") / 1000,
                lambda: _checkpoint_recovery(broker),
                "recovery-checkpoint",
            )
        ),
        asyncio.create_task(
            _every(
                cfg.int("log.flush.start.offset.checkpoint.interval.ms") / 1000,
                lambda: _checkpoint_start(broker),
                "start-checkpoint",
            )
        ),
    ]
    workers = broker.workers
    sched = cfg.int("log.flush.scheduler.interval.ms")
    if sched < 2**62:
        tasks.append(
            asyncio.create_task(
                _every(sched / 1000, lambda: _flush_due(broker), "flush", executor=workers.scheduler)
            )
        )
    tasks.append(
        asyncio.create_task(
            _every(1.0, lambda: _close_retired(broker), "delete-retired-segments", executor=workers.scheduler)
        )
    )
    from kafkatool.broker import maintenance

    tasks.extend(maintenance.start(broker))
    from kafkatool.broker.security import tokens

    if tokens.secret_key(cfg) is not None and not broker.is_member:
        # KafkaController's delete-expired-tokens task (the active controller's, in a cluster)
        tasks.append(
            asyncio.create_task(
                _every(
                    cfg.int(tokens.EXPIRY_CHECK_INTERVAL) / 1000,
                    lambda: _expire_tokens(broker),
                    "delete-expired-tokens",
                    first=0,
                )
            )
        )
    return tasks


def _expire_tokens(broker) -> None:
    cluster = broker.cluster
    if cluster is not None and (cluster.controller is None or not cluster.controller.active):
        return
    broker.token_manager.expire_tokens()
