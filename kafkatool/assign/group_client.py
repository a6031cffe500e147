"""A consumer group's coordinator requests on the one admin client, once for every caller:
FindCoordinator (also a transactional id's, for ``kafkatool transactions``), OffsetFetch and
OffsetCommit. ``kafkatool groups --bootstrap-server``
(broker/group/live.py: Java's admin, a commit without a member) and ``kafkatool consume --group``
(assign/group_consumer.py: a member's commit with its generation) send them through here."""

from __future__ import annotations

from kafkatool.assign.kafka_client import KafkaAdmin, KafkaAdminError, describe_error
from kafkatool.protocol.apis import API_BY_KEY

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10

TopicPartition = tuple[str, int]


class GroupRequestError(KafkaAdminError):
    """A group request the cluster refused as a whole (one line, Kafka's wording; ``code``)."""


def check(code: int, what: str, message: str | None = None) -> None:
    if code:
        raise GroupRequestError(f"{what}: {describe_error(code, message)}", code)


def find_coordinator(admin: KafkaAdmin, key: str, key_type: int = 0) -> int:
    """The coordinator's node id (FindCoordinator; key type 0: a group, 1: a transactional id);
    its address joins the cached metadata's brokers if it is not there."""
    node = find_coordinators(admin, [key], key_type)[key]
    if isinstance(node, GroupRequestError):
        raise node
    return node


def find_coordinators(
    admin: KafkaAdmin, keys: list[str], key_type: int = 0
) -> dict[str, int | GroupRequestError]:
    """Each key's coordinator (node id) or its refusal: one FindCoordinator with every key from
    v4 on (KIP-699, as the admin client batches them), one per key before; each coordinator's
    address joins the cached metadata's brokers if it is not there."""
    conn = admin._any()
    version = conn.version_for(FIND_COORDINATOR)
    info = API_BY_KEY[FIND_COORDINATOR]
    kind = "transactional id" if key_type == 1 else "group"
    answers: list[tuple[str, int, str | None, int, str, int]] = []
    keys = list(dict.fromkeys(keys))
    if version >= 4:
        resp = conn.request(FIND_COORDINATOR, info.request(key_type=key_type, coordinator_keys=keys), version)
        by_key = {c.key: c for c in resp.coordinators}
        for key in keys:
            c = by_key.get(key)
            if c is None:
                answers.append((key, -1, "no answer for the key", -1, "", -1))
            else:
                answers.append((key, c.error_code, c.error_message, c.node_id, c.host, c.port))
    else:
        for key in keys:
            resp = conn.request(FIND_COORDINATOR, info.request(key=key, key_type=key_type), version)
            answers.append((key, resp.error_code, resp.error_message, resp.node_id, resp.host, resp.port))
    out: dict[str, int | GroupRequestError] = {}
    meta = admin.metadata_cached()
    for key, code, message, node, host, port in answers:
        try:
            check(code, f"FindCoordinator for {kind} '{key}'", message)
        except GroupRequestError as exc:
            out[key] = exc
            continue
        if node not in meta.brokers:
            meta.brokers[node] = (host, port, None)
        out[key] = node
    return out


def offset_fetch(
    admin: KafkaAdmin, group: str, node: int, tps: list[TopicPartition] | None = None
) -> dict[TopicPartition, tuple[int, str]]:
    """OffsetFetch (require_stable, as Java's consumer and admin ask) of ``tps`` (None: every
    partition the group committed): ``{tp: (offset, metadata)}`` for the partitions with a
    committed offset. An error, the group's or a partition's, raises GroupRequestError with
    its code (UNSTABLE_OFFSET_COMMIT: a transaction's offsets are pending, ask again)."""
    from kafkatool.protocol.generated.offset_fetch_request import OffsetFetchRequestTopic

    topics = None
    if tps is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        topics = [
            OffsetFetchRequestTopic(name=t, partition_indexes=sorted(ps))
            for t, ps in sorted(by_topic.items())
        ]
    req = API_BY_KEY[OFFSET_FETCH].request(group_id=group, topics=topics, require_stable=True)
    resp = admin.request(OFFSET_FETCH, req, node)
    check(resp.error_code, f"OffsetFetch for group '{group}'")
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            check(p.error_code, f"OffsetFetch {t.name}-{p.partition_index} for group '{group}'")
            if p.committed_offset >= 0:
                out[(t.name, p.partition_index)] = (p.committed_offset, p.metadata or "")
    return out


def offset_commit(
    admin: KafkaAdmin,
    group: str,
    node: int,
    offsets: dict[TopicPartition, int],
    *,
    generation: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
) -> dict[TopicPartition, int]:
    """OffsetCommit: an error code per partition. Without a member (generation -1, as Java's
    alterConsumerGroupOffsets) the coordinator takes it only while the group has no members;
    a member commits with its generation and member id (ConsumerCoordinator)."""
    from kafkatool.protocol.generated.offset_commit_request import (
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )

    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (t, p), off in offsets.items():
        by_topic.setdefault(t, []).append((p, off))
    req = API_BY_KEY[OFFSET_COMMIT].request(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=group_instance_id,
        retention_time_ms=-1,
        topics=[
            OffsetCommitRequestTopic(
                name=t,
                partitions=[
                    OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="")
                    for p, o in sorted(ps)
                ],
            )
            for t, ps in sorted(by_topic.items())
        ],
    )
    resp = admin.request(OFFSET_COMMIT, req, node)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}
