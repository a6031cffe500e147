"""Committed offsets of one group and Kafka's offset expiry rules (``offsets.retention.minutes``).

Kafka (since 2.1, KIP-211) expires offsets per group, not per commit:

* an Empty group with a protocol type: all its offsets, ``offsets.retention.ms``
  after the group became Empty (its ``currentStateTimestamp``);
* a Stable ``consumer`` group: offsets of topics no member subscribes to any
  more, ``offsets.retention.ms`` after their commit;
* a group that never had a protocol type (manual assignment, admin tools):
  each offset ``offsets.retention.ms`` after its commit;
* a commit that carried an explicit retention time (OffsetCommit v2-v4) expires
  at its own ``expireTimestamp`` instead (the pre-2.1 semantics).
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkatool.protocol.errors import ErrorCode

NO_LEADER_EPOCH = -1
NO_OFFSET = -1
#: offset.metadata.max.bytes
MAX_METADATA_BYTES = 4096


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    #: only for commits with an explicit retention time (written as OffsetCommitValue v1)
    expire_timestamp: int | None = None


def oversized_metadata(
    offsets: dict[tuple[str, int], OffsetAndMetadata], max_bytes: int
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], OffsetAndMetadata]]:
    """Kafka's validateOffsetMetadataLength for OffsetCommit and TxnOffsetCommit alike:
    ({tp: OFFSET_METADATA_TOO_LARGE} for metadata over ``max_bytes`` (UTF-8), the other offsets)."""
    rejected: dict[tuple[str, int], int] = {}
    valid = {}
    for tp, om in offsets.items():
        if om.metadata is not None and len(om.metadata.encode()) > max_bytes:
            rejected[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
        else:
            valid[tp] = om
    return rejected, valid


class OffsetStore:
    """The offsets of one group, keyed by (topic, partition), plus transactional commits
    that wait for their marker (by producer id)."""

    __slots__ = ("offsets", "pending_txn")

    def __init__(self):
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        self.pending_txn: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = {}

    def __len__(self) -> int:
        return len(self.offsets)

    def get(self, tp: tuple[str, int]) -> OffsetAndMetadata | None:
        return self.offsets.get(tp)

    def put(self, tp: tuple[str, int], om: OffsetAndMetadata) -> None:
        self.offsets[tp] = om

    def remove(self, tp: tuple[str, int]) -> OffsetAndMetadata | None:
        return self.offsets.pop(tp, None)

    def has_pending(self, tp: tuple[str, int]) -> bool:
        return any(tp in p for p in self.pending_txn.values())

    def complete_txn(self, producer_id: int, commit: bool) -> None:
        pending = self.pending_txn.pop(producer_id, None)
        if commit and pending:
            self.offsets.update(pending)

    def expired(
        self,
        now_ms: int,
        retention_ms: int,
        *,
        protocol_type: str | None,
        is_empty: bool,
        is_stable: bool,
        state_timestamp: int | None,
        subscribed_topics: set[str] | None,
    ) -> list[tuple[str, int]]:
        """The partitions whose offsets expire now (Kafka's ``GroupMetadata.removeExpiredOffsets``)."""
        if protocol_type is not None and is_empty:

            def base(om: OffsetAndMetadata) -> int:
                return state_timestamp if state_timestamp is not None else om.commit_timestamp

            keep: set[str] = set()
        elif protocol_type == "consumer" and subscribed_topics is not None and is_stable:

            def base(om: OffsetAndMetadata) -> int:
                return om.commit_timestamp

            keep = subscribed_topics
        elif protocol_type is None:

            def base(om: OffsetAndMetadata) -> int:
                return om.commit_timestamp

            keep = set()
        else:
            return []
        out = []
        for tp, om in self.offsets.items():
            if tp[0] in keep or self.has_pending(tp):
                continue
            if om.expire_timestamp is None:
                if now_ms - base(om) >= retention_ms:
                    out.append(tp)
            elif now_ms >= om.expire_timestamp:
                out.append(tp)
        return out
