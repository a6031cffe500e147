"""Retention and compaction in the broker, with the engine the offline tools use.

* Retention (``log.retention.check.interval.ms``, default 5 min): Kafka's
  ``deleteOldSegments`` via :func:`kafkatool.log.retention.plan_retention` /
  ``apply_retention``, per log with its topic config.  When even the active
  segment breaches retention, the broker rolls first so it can go, as Kafka does.
* Compaction (``log.cleaner.enable``, every ``log.cleaner.backoff.ms``): for
  logs with ``cleanup.policy`` containing ``compact`` whose dirty ratio reached
  ``min.cleanable.dirty.ratio`` (or whose dirty data is older than
  ``max.compaction.lag.ms``), the filthiest log is cleaned with
  :func:`kafkatool.log.cleaner.compact`; the cleaner offsets persist in each
  log dir's ``cleaner-offset-checkpoint``.

Both run on the event loop between requests (the log is not thread-safe), one
log per cleaner pass, so a large compaction delays requests while it runs.
"""

from __future__ import annotations

import asyncio
import logging
import time

log = logging.getLogger("kafkatool.broker.maintenance")


def _now_ms() -> int:
    return int(time.time() * 1000)


def run_retention(broker, now_ms: int | None = None) -> int:
    """One retention pass over every log; returns the number of segments deleted."""
    from kafkatool.log.retention import apply_retention, plan_retention

    now = _now_ms() if now_ms is None else now_ms
    deleted = 0
    changed = False
    for (topic, part), lg in list(broker.manager.logs.items()):
        cfg = lg.config
        plan = plan_retention(lg, cfg, now_ms=now)
        if any("would roll a new segment" in n for n in plan.notes) and lg.active_segment.size > 0:
            lg.roll()
            plan = plan_retention(lg, cfg, now_ms=now)
        if not plan.deletions:
            continue
        res = apply_retention(lg, plan, quarantine=None)
        deleted += len(res.deleted)
        changed = True
        broker.wake((topic, part))
        log.info(
            "retention deleted topic=%s partition=%d segments=%d bytes=%d reason=%s log_start_offset=%d",
            topic,
            part,
            len(res.deleted),
            plan.bytes_deleted,
            plan.deletions[-1].reason,
            lg.log_start_offset,
        )
    if changed:
        broker.manager.checkpoint_log_start_offsets()
    return deleted


class CleanerState:
    """The broker's cleaner; its offsets are the log manager's cleaner-offset-checkpoint."""

    def __init__(self, broker):
        self.broker = broker

    def save(self) -> None:
        self.broker.manager.checkpoint_cleaner_offsets()

    def run_once(self, now_ms: int | None = None) -> bool:
        """Clean the filthiest compacted log that needs it; True when one was cleaned."""
        from kafkatool.log.cleaner import cleanable_offsets, compact
        from kafkatool.log.offset_map import OffsetMap

        now = _now_ms() if now_ms is None else now_ms
        cfg = self.broker.config
        mgr = self.broker.manager
        best = None
        for tp, lg in list(mgr.logs.items()):
            if not lg.config.compact:
                continue
            rng = cleanable_offsets(lg, lg.config, mgr.cleaner_offset(tp), now)
            if rng.not_due_reason(lg.config) is None and (
                best is None or rng.dirty_ratio > best[2].dirty_ratio
            ):
                best = (tp, lg, rng)
        if best is None:
            return False
        tp, lg, rng = best
        omap = OffsetMap.for_broker(
            cfg.int("log.cleaner.dedupe.buffer.size"),
            cfg.int("log.cleaner.threads"),
            float(cfg.get("log.cleaner.io.buffer.load.factor")),
        )
        t0 = time.monotonic()
        result = compact(
            lg, lg.config, checkpoint=mgr.cleaner_offset(tp), now_ms=now, offset_map=omap, write=True
        )
        if result.checkpoint_after is not None:
            mgr.set_cleaner_offset(tp, result.checkpoint_after)
        self.save()
        self.broker.wake(tp)
        log.info(
            "log cleaned topic=%s partition=%d dirty_ratio=%.3f rounds=%d checkpoint=%s seconds=%.3f",
            tp[0],
            tp[1],
            rng.dirty_ratio,
            len(result.rounds),
            result.checkpoint_after,
            time.monotonic() - t0,
        )
        return True


async def _retention_loop(broker, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            run_retention(broker)
        except Exception:
            log.exception("retention pass failed")


async def _cleaner_loop(broker, backoff: float) -> None:
    state = CleanerState(broker)
    broker.cleaner = state
    while True:
        try:
            cleaned = state.run_once()
        except Exception:
            log.exception("cleaner pass failed")
            cleaned = False
        await asyncio.sleep(0 if cleaned else backoff)


def start(broker) -> list[asyncio.Task]:
    cfg = broker.config
    tasks = [asyncio.create_task(_retention_loop(broker, cfg.int("log.retention.check.interval.ms") / 1000))]
    if cfg.bool("log.cleaner.enable"):
        tasks.append(asyncio.create_task(_cleaner_loop(broker, cfg.int("log.cleaner.backoff.ms") / 1000)))
    return tasks
