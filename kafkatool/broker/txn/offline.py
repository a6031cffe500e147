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
* Whether the dirs hold every ``__transaction_state`` partition is judged against the topic's
  partition count where the dir keeps it (``kafkatool serve``'s embedded metadata, a KRaft
  ``__cluster_metadata`` log), else ``transaction.state.log.num.partitions``' default (50), so a
  backup that lost partition 7 of 50 says so (:meth:`OfflineView.coordinator_gap`) instead of
  answering as if no transactional id lived there.
* "Now" is the newest record timestamp in the dirs unless given: a backup read later is
  judged as of when it was taken.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.broker.txn import state_log as S
from kafkatool.broker.txn.coordinator import DEFAULTS
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
    #: what replaying ``__transaction_state`` met and read past (log.ReadDamage: damaged
    #: batches, records the loader could not decode), in the order met
    state_damage: list = field(default_factory=list)
    #: what rebuilding the partitions' producer state met (log.ReadDamage), in the order met
    damage: list = field(default_factory=list)
    #: ``__transaction_state``'s partition count and where it was read (None: not kept in the
    #: dirs; then transaction.state.log.num.partitions' default, or more if the dirs hold more)
    state_partition_count: int = 0
    state_count_source: str | None = None

    @property
    def missing_state_partitions(self) -> list[int]:
        have = set(self.state_partitions)
        return [p for p in range(self.state_partition_count) if p not in have]

    @property
    def coordinator_complete(self) -> bool:
        """Every ``__transaction_state`` partition of the topic is here (a broker of a cluster
        holds only some, a backup may have lost one: the others' ids are unknown, not absent)."""
        return bool(self.state_partitions) and not self.missing_state_partitions

    def coordinator_gap(self) -> str | None:
        """One line naming the ``__transaction_state`` partitions the dirs lack, when they hold
        some (or the dir's metadata says the topic exists) but not all; None otherwise."""
        missing = self.missing_state_partitions
        if not missing or (not self.state_partitions and self.state_count_source is None):
            return None
        where = self.state_count_source or (
            "transaction.state.log.num.partitions' default: the dirs keep no partition count"
        )
        return (
            f"the log dirs hold {len(self.state_partitions)} of the {self.state_partition_count} "
            f"__transaction_state partitions ({where}); missing: {_ranges(missing)}. The transactional "
            "ids those partitions hold are unknown here, not absent"
        )

    def transactional_ids(self, producer_ids: set[int]) -> dict[int, str]:
        """ListTransactions filtered by producer id, answered from the coordinator's view."""
        return {d.producer_id: tid for tid, d in self.coordinator.items() if d.producer_id in producer_ids}


def _ranges(ps: list[int]) -> str:
    """0,1,2,5,7,8 -> 0-2,5,7-8"""
    out, i = [], 0
    while i < len(ps):
        j = i
        while j + 1 < len(ps) and ps[j + 1] == ps[j] + 1:
            j += 1
        out.append(str(ps[i]) if i == j else f"{ps[i]}-{ps[j]}")
        i = j + 1
    return ",".join(out)


def state_partition_count(log_dirs: list[Path]) -> tuple[int | None, str | None]:
    """``__transaction_state``'s partition count as a dir keeps it: serve's embedded metadata, else
    a KRaft ``__cluster_metadata`` log's image (with the file or dir read); (None, None) when no
    dir keeps one."""
    from kafkatool.log import embedded_metadata
    from kafkatool.log.metadata_log import load_directory
    from kafkatool.log.topic_settings import CLUSTER_METADATA_DIR

    for d in log_dirs:
        path = Path(d) / embedded_metadata.FILE
        try:
            checked = embedded_metadata.read(path)
        except embedded_metadata.EmbeddedMetadataError:
            checked = None
        if checked is not None:
            t = checked.data.get("topics", {}).get(S.TRANSACTION_STATE_TOPIC)
            if t is not None:
                return int(t["partitions"]), str(path)
    for d in log_dirs:
        mdir = Path(d) / CLUSTER_METADATA_DIR
        if not mdir.is_dir():
            continue
        try:
            topic = load_directory(mdir).image.topic_by_name(S.TRANSACTION_STATE_TOPIC)
        except OSError:
            continue
        if topic is not None and topic.partitions:
            return len(topic.partitions), str(mdir)
    return None, None


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
    producers: bool = True,
) -> OfflineView:
    """The producers of the partitions of ``topic`` (None: every partition in the dirs, internal
    ones too, as Kafka's tool searches a broker; ``producers=False``: none, the coordinator's view
    alone) and the coordinator's view, read-only.  Damaged data is read past and said
    (``state_damage``, ``damage``)."""
    with LogManager(log_dirs, writable=False) as mgr:
        logs = dict(sorted(mgr.logs.items()))
        newest = newest_timestamp(logs.values())
        now = now_ms if now_ms is not None else (newest if newest is not None else int(time.time() * 1000))
        view = OfflineView([], {}, now_ms=now, newest_ms=newest)
        count, view.state_count_source = state_partition_count(log_dirs)
        state_ps = [p for t, p in logs if t == S.TRANSACTION_STATE_TOPIC]
        if count is None:
            count = max([DEFAULTS["transaction.state.log.num.partitions"], *(p + 1 for p in state_ps)])
        view.state_partition_count = count
        for (t, p), lg in logs.items():
            if t != S.TRANSACTION_STATE_TOPIC:
                continue
            view.state_partitions.append(p)
            part_loader = S.StateLoader()
            lg.replay(part_loader.feed, view.state_damage, skipped=part_loader.skipped)
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
        for (t, p), lg in logs.items() if producers else ():
            if (topic is not None and t != topic) or (partition is not None and p != partition):
                continue
            lg.rebuild_producer_state(now, damage=view.damage)
            lg.update_high_watermark(lg.log_end_offset)
            view.partitions.append(
                PartitionProducers(t, p, active_producers(lg), lg.last_stable_offset, lg.log_end_offset)
            )
    return view
