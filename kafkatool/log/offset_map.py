"""The cleaner's key -> latest offset map (Kafka's SkimpyOffsetMap, by capacity).

Kafka stores an MD5 digest (16 bytes) and an offset (8 bytes) per slot in a
buffer of ``log.cleaner.dedupe.buffer.size / log.cleaner.threads`` bytes and
fills it to ``log.cleaner.io.buffer.load.factor``; when it is full a cleaning
round stops there.  This map holds the keys themselves (no digest collisions)
but keeps Kafka's capacity, so a round covers the same range of offsets.
"""

from __future__ import annotations

BYTES_PER_ENTRY = 16 + 8  # MD5 digest + offset


class OffsetMap:
    def __init__(self, memory_bytes: int = 134_217_728, load_factor: float = 0.9):
        memory_bytes = min(int(memory_bytes), 2**31 - 1)
        self.slots = memory_bytes // BYTES_PER_ENTRY
        self.max_entries = int(self.slots * load_factor)
        if self.max_entries < 1:
            raise ValueError(
                f"an offset map of {memory_bytes} bytes holds no key: raise log.cleaner.dedupe.buffer.size"
            )
        self.entries: dict[bytes, int] = {}
        self.latest_offset = -1

    @classmethod
    def for_broker(cls, dedupe_buffer_size: int, threads: int = 1, load_factor: float = 0.9) -> OffsetMap:
        return cls(dedupe_buffer_size // max(int(threads), 1), load_factor)

    def clear(self) -> None:
        self.entries.clear()
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> None:
        self.entries[key] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        return self.entries.get(key, -1)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def utilization(self) -> float:
        return len(self.entries) / self.slots if self.slots else 0.0
