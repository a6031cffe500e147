"""Transactions from a log dir alone (``kafkatool transactions --log-dir``), read-only: a
running broker's dir, a stopped one's or a backup.

* Each partition's producers are rebuilt as the broker rebuilds them at start-up
  (:meth:`~kafkatool.log.log.Log.rebuild_producer_state`: the latest valid snapshot, the
  batches after it) and listed as DescribeProducers answers them
  (:func:`~kafkatool.broker.txn.views.active_producers`), with the partition's last stable
  offset (its high watermark taken as the log end: the dir holds no current one).
* The ``__transaction_state`` partitions in the dirs are replayed with the coordinator's own
  loader (:class:`~kafkatool.broker.txn.state_log.StateLoader`, every record to the log end):
  each transactional id as its coordinator would hold it after a restart.
* "Now" is the newest record timestamp in the dirs unless given: a backup read later is
  judged as of when it was taken.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.broker.txn import state_log as S
from kafkatool.broker.txn.views import Description, PartitionProducers, active_producers
from kafkatool.log.manager import LogManager

TopicPartition = tuple[str, int]


@dataclass
class OfflineView:
    partitions: list[PartitionProducers]
    #: transactional id -> its coordinator's state (the ``__transaction_state`` partitions here)
    coordinator: dict[str, Description]
    #: the ``__transaction_state`` partitions the dirs hold
    state_partitions: list[int] = field(default_factory=list)
    #: the instant durations are measured from, and the newest record timestamp (None: no records)
    now_ms: int = 0
    newest_ms: int | None = None
    #: records of ``__transaction_state`` the loader could not decode ("offset N: why")
    skipped: list[str] = field(default_factory=list)

    @property
    def coordinator_complete(self) -> bool:
        """Every ``__transaction_state`` partition from 0 to the highest one is here (a broker of a
        cluster holds only some: the others' ids are unknown, not absent)."""
        ps = self.state_partitions
        return bool(ps) and ps == list(range(max(ps) + 1))

    def transactional_ids(self, producer_ids: set[int]) -> dict[int, str]:
        """ListTransactions filtered by producer id, answered from the coordinator's view."""
        return {d.producer_id: tid for tid, d in self.coordinator.items() if d.producer_id in producer_ids}


def newest_timestamp(logs) -> int | None:
    """The newest record timestamp of the logs (their segments' time indexes and tails)."""
    best = None
    for lg in logs:
        for seg in lg.segments:
            ts = seg.max_timestamp_so_far
            if ts is not None and ts >= 0 and (best is None or ts > best):
                best = ts
    return best


def read(
    log_dirs: list[Path],
    *,
    topic: str | None = None,
    partition: int | None = None,
    now_ms: int | None = None,
) -> OfflineView:
    """The producers of the partitions of ``topic`` (None: every partition in the dirs, internal
    ones too, as Kafka's tool searches a broker) and the coordinator's view, read-only."""
    with LogManager(log_dirs, writable=False) as mgr:
        logs = dict(sorted(mgr.logs.items()))
        newest = newest_timestamp(logs.values())
        now = now_ms if now_ms is not None else (newest if newest is not None else int(time.time() * 1000))
        view = OfflineView([], {}, now_ms=now, newest_ms=newest)
        for (t, p), lg in logs.items():
            if t != S.TRANSACTION_STATE_TOPIC:
                continue
            view.state_partitions.append(p)
            part_loader = S.StateLoader()
            for batch in lg.batches(lg.log_start_offset):
                part_loader.feed(batch)
            view.skipped += [f"{t}-{p} {m}" for m in part_loader.skipped]
            for tid, rec in part_loader.current().items():
                view.coordinator[tid] = Description(
                    tid,
                    f"{t}-{p}",
                    rec.producer_id,
                    rec.producer_epoch,
                    S.STATE_NAMES.get(rec.state, "Unknown"),
                    rec.timeout_ms,
                    rec.start_ms,
                    set(rec.partitions),
                )
        for (t, p), lg in logs.items():
            if (topic is not None and t != topic) or (partition is not None and p != partition):
                continue
            lg.rebuild_producer_state(now)
            lg.update_high_watermark(lg.log_end_offset)
            view.partitions.append(
                PartitionProducers(t, p, active_producers(lg), lg.last_stable_offset, lg.log_end_offset)
            )
    return view
