"""Consumer groups from a log dir alone (``kafkatool groups --log-dir``): the coordinator's own
load of ``__consumer_offsets``, offline and as of any instant.

Each ``__consumer_offsets`` partition is replayed with the coordinator's loader
(:class:`~kafkatool.broker.group.persistence.PartitionLoader`: last value per key,
tombstones delete, transactional commits count once their COMMIT marker is read), keeping
only the batches written at or before ``at_ms``; each group is rebuilt as the coordinator
rebuilds it at start-up (classic groups by
:func:`~kafkatool.broker.group.coordinator.group_from_loaded`, KIP-848 consumer groups by
``ConsumerGroup.replay``), and the offsets that had expired by then are dropped by the
coordinator's own rule (:func:`~kafkatool.broker.group.coordinator.expiring_offsets`,
``offsets.retention.minutes``).  Lag is measured against the partitions present in the same
dir: their log end offset as of ``at_ms`` (the first offset whose batch was written after it,
by record timestamps, as ListOffsets by timestamp finds it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.broker.group import persistence as P
from kafkatool.broker.group.consumer import ConsumerGroup
from kafkatool.broker.group.coordinator import Group, expiring_offsets, group_from_loaded
from kafkatool.formats import internal_topics as IT
from kafkatool.formats.generated import ConsumerProtocolAssignment
from kafkatool.log.manager import LogManager

#: offsets.retention.minutes' default (7 days), in milliseconds
DEFAULT_RETENTION_MS = 10080 * 60 * 1000


@dataclass
class MemberRow:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    partitions: list[tuple[str, int]]


@dataclass
class OffsetRow:
    topic: str
    partition: int
    current_offset: int
    #: the partition's log end as of the instant; None when the partition is not in the dirs
    log_end_offset: int | None
    member: MemberRow | None = None
    metadata: str = ""
    commit_timestamp: int = -1

    @property
    def lag(self) -> int | None:
        if self.log_end_offset is None:
            return None
        return max(self.log_end_offset - self.current_offset, 0)


@dataclass
class GroupView:
    group_id: str
    #: "classic" or "consumer" (KIP-848), as ListGroups v5 names them
    group_type: str
    state: str
    protocol_type: str
    #: the classic group's chosen protocol (the assignor), or the consumer group's server assignor
    assignor: str
    members: list[MemberRow] = field(default_factory=list)
    rows: list[OffsetRow] = field(default_factory=list)
    #: offsets the coordinator would have expired by the instant (not in ``rows``)
    expired: int = 0
    #: the __consumer_offsets partition that holds the group
    partition: int = -1


def _classic(group: Group) -> tuple[str, list[MemberRow]]:
    members = []
    for m in group.members.values():
        decoded = IT.read_consumer_protocol(ConsumerProtocolAssignment, getattr(m, "assignment", b"") or b"")
        parts = []
        if decoded is not None:
            for tp in decoded[1].assigned_partitions or []:
                parts.extend((tp.topic, p) for p in tp.partitions)
        members.append(MemberRow(m.member_id, m.group_instance_id, m.client_id, m.client_host, sorted(parts)))
    state = group.state.value if (group.members or len(group.offsets)) else "Dead"
    return state, members


def _consumer(group: ConsumerGroup, names: dict) -> tuple[str, list[MemberRow]]:
    # topic ids as text: the records' and partition.metadata's id types differ
    ids = dict(names)
    ids.update((str(info.topic_id), name) for name, info in group.subscription_metadata.items())
    members = []
    for m in group.members.values():
        parts = [(ids.get(str(t), str(t)), p) for t, ps in m.assigned.items() for p in ps]
        members.append(MemberRow(m.member_id, m.instance_id, m.client_id, m.client_host, sorted(parts)))
    return group.state, members


def _log_end(mgr: LogManager, tp: tuple[str, int], at_ms: int | None) -> int | None:
    lg = mgr.get_log(*tp)
    if lg is None:
        return None
    if at_ms is not None:
        found = lg.offset_for_timestamp(at_ms + 1)
        if found is not None:
            return found[1]
    return lg.log_end_offset


def read_groups(
    log_dirs: list[Path], *, at_ms: int | None = None, retention_ms: int = DEFAULT_RETENTION_MS
) -> dict[str, GroupView]:
    """Every group in the dirs' ``__consumer_offsets`` as it stood at ``at_ms`` (None: now),
    read-only (the dirs may belong to a running broker or be a backup)."""
    now = int(time.time() * 1000) if at_ms is None else at_ms
    out: dict[str, GroupView] = {}
    with LogManager(log_dirs, writable=False) as mgr:
        topic_ids = {}
        for (topic, _), lg in mgr.logs.items():
            tid = getattr(lg, "topic_id", None)
            if tid is not None:
                topic_ids[str(tid)] = topic
        for (topic, partition), lg in sorted(mgr.logs.items()):
            if topic != P.OFFSETS_TOPIC:
                continue
            loader = P.PartitionLoader()
            for batch in lg.batches(lg.log_start_offset):
                if at_ms is None or batch.max_timestamp <= at_ms:
                    loader.feed(batch)
            for gid, loaded in loader.result().items():
                group = None
                if loaded.consumer_records:
                    cg = ConsumerGroup(gid, partition)
                    for rt, k, v in loaded.consumer_records:
                        cg.replay(rt, k, v)
                    if cg.exists:
                        cg.offsets = loaded.offsets
                        group = cg
                if group is None:
                    group = group_from_loaded(gid, partition, loaded)
                expired = expiring_offsets(group, now, retention_ms)
                for tp in expired:
                    group.offsets.remove(tp)
                if isinstance(group, ConsumerGroup):
                    state, members = _consumer(group, topic_ids)
                    og = GroupView(gid, "consumer", state, "consumer", "", members, partition=partition)
                    assignors = {m.server_assignor for m in group.members.values() if m.server_assignor}
                    og.assignor = ",".join(sorted(assignors))
                else:
                    state, members = _classic(group)
                    og = GroupView(
                        gid,
                        "classic",
                        state,
                        group.protocol_type or "",
                        group.protocol_name or "",
                        members,
                        partition=partition,
                    )
                if state == "Dead" and not len(group.offsets):
                    continue  # deleted (tombstoned) or never more than a name
                og.expired = len(expired)
                owner = {tp: m for m in members for tp in m.partitions}
                for tp, om in sorted(group.offsets.offsets.items()):
                    og.rows.append(
                        OffsetRow(
                            tp[0],
                            tp[1],
                            om.offset,
                            _log_end(mgr, tp, at_ms),
                            owner.get(tp),
                            om.metadata,
                            om.commit_timestamp,
                        )
                    )
                out[gid] = og
    return out


def reset_csv(groups: list[GroupView], *, with_group: bool) -> str:
    """kafka-consumer-groups.sh --reset-offsets --export's CSV: ``topic,partition,offset`` for
    one group, ``group,topic,partition,offset`` for several (ResetOffsetsCommand's
    exportOffsetsToCsv), which ``--from-file`` reads back."""
    lines = []
    for og in groups:
        for r in og.rows:
            row = f"{r.topic},{r.partition},{r.current_offset}"
            lines.append(f"{og.group_id},{row}" if with_group else row)
    return "".join(line + "\n" for line in lines)
