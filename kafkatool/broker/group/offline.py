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
from pathlib import Path

from kafkatool.broker.group import persistence as P
from kafkatool.broker.group.consumer import ConsumerGroup
from kafkatool.broker.group.coordinator import Group, expiring_offsets, group_from_loaded
from kafkatool.broker.group.views import Committed, GroupView, MemberRow, build_rows
from kafkatool.formats import internal_topics as IT
from kafkatool.log.manager import LogManager

#: offsets.retention.minutes' default (7 days), in milliseconds
DEFAULT_RETENTION_MS = 10080 * 60 * 1000


def _classic(group: Group) -> tuple[str, list[MemberRow]]:
    members = []
    for m in group.members.values():
        parts = IT.assigned_partitions(getattr(m, "assignment", b""))
        members.append(MemberRow(m.member_id, m.group_instance_id, m.client_id, m.client_host, parts))
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


def _log_ends(mgr: LogManager, at_ms: int | None):
    def answer(tps: list[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        out: dict[tuple[str, int], int | None] = {}
        for tp in tps:
            lg = mgr.get_log(*tp)
            if lg is None:
                out[tp] = None
                continue
            found = lg.offset_for_timestamp(at_ms + 1) if at_ms is not None else None
            out[tp] = found[1] if found is not None else lg.log_end_offset
        return out

    return answer


def read_groups(
    log_dirs: list[Path],
    *,
    at_ms: int | None = None,
    retention_ms: int = DEFAULT_RETENTION_MS,
    damage: list | None = None,
) -> dict[str, GroupView]:
    """Every group in the dirs' ``__consumer_offsets`` as it stood at ``at_ms`` (None: now),
    read-only (the dirs may belong to a running broker or be a backup).  Damaged data is read
    past (``Log.replay``): what the read met goes to ``damage`` (log.ReadDamage), the groups
    are those of everything readable."""
    damage = [] if damage is None else damage
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
            lg.replay(
                loader.feed,
                damage,
                keep=None if at_ms is None else (lambda b: b.max_timestamp <= at_ms),
                skipped=loader.skipped,
            )
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
                    # the default of group.consumer.assignors is uniform first
                    assignor = group.preferred_assignor("uniform")
                    og = GroupView(gid, "consumer", state, "consumer", assignor, members, partition=partition)
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
                committed = {
                    tp: Committed(om.offset, om.metadata, om.commit_timestamp)
                    for tp, om in group.offsets.offsets.items()
                }
                og.rows = build_rows(members, committed, _log_ends(mgr, at_ms))
                out[gid] = og
    return out
