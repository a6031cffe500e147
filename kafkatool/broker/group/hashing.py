"""Which ``__consumer_offsets`` partition owns a group: Kafka's ``Utils.abs(groupId.hashCode) % n``."""

from __future__ import annotations

from kafkatool.formats.java_collections import java_string_hash

__all__ = ["INT32_MIN", "java_string_hash", "partition_for"]

INT32_MIN = -(2**31)


def partition_for(group_id: str, partitions: int) -> int:
    """``Utils.abs`` maps INT32_MIN to 0 (plain ``abs`` would overflow in Java)."""
    h = java_string_hash(group_id)
    return (0 if h == INT32_MIN else abs(h)) % partitions
