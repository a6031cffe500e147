"""Which ``__consumer_offsets`` partition owns a group: Kafka's ``Utils.abs(groupId.hashCode) % n``."""

from __future__ import annotations

INT32_MIN = -(2**31)


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, wrapping at 32 bits (signed result)."""
    h = 0
    b = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(b), 2):
        h = (31 * h + ((b[i] << 8) | b[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """``Utils.abs`` maps INT32_MIN to 0 (plain ``abs`` would overflow in Java)."""
    h = java_string_hash(group_id)
    return (0 if h == INT32_MIN else abs(h)) % partitions
