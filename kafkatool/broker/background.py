"""Background work on Kafka's schedule: checkpoints, time-based flushes, retention, compaction."""

from __future__ import annotations

import asyncio
import logging
import time

log = logging.getLogger("kafkatool.broker.background")


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _every(seconds: float, fn, name: str) -> None:
    while True:
        await asyncio.sleep(seconds)
        try:
            fn()
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
            lg.flush()
            last[tp] = now


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
    sched = cfg.int("log.flush.scheduler.interval.ms")
    if sched < 2**62:
        tasks.append(asyncio.create_task(_every(sched / 1000, lambda: _flush_due(broker), "flush")))
    from kafkatool.broker import maintenance

    tasks.extend(maintenance.start(broker))
    return tasks
