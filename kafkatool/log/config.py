"""Per-log settings with Kafka's topic-config names and defaults (notes/storage.md section 11)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import cached_property

from kafkatool.formats.compression import codec_from_name
from kafkatool.formats.index import OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE, max_index_size

LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class LogConfig:
    """A log's settings. The derived values below are cached_property: computed once per
    instance (a config never changes; a change makes a new one with ``with_overrides``), as
    every append asks several of them."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    preallocate: bool = False
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    # deprecated in Kafka 3.6 (KIP-937) but honoured: the fallback of before/after at their default
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    retention_ms: int = 604800000
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = field(default=("delete",))
    delete_retention_ms: int = 86400000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    producer_id_expiration_ms: int = 86400000
    # LogValidator's target codec (BrokerCompressionType) and Partition's min ISR: Kafka's
    # LogConfig holds both, so the produce path reads them from the log, not per request
    compression_type: str = "producer"
    min_insync_replicas: int = 1
    # deprecated (KIP-724) but honoured: false refuses a client's Fetch v0-3 of this topic
    message_downconversion_enable: bool = True

    # Kafka topic-config names -> attribute
    NAMES = {
        "segment.bytes": "segment_bytes",
        "segment.ms": "segment_ms",
        "segment.jitter.ms": "segment_jitter_ms",
        "segment.index.bytes": "segment_index_bytes",
        "index.interval.bytes": "index_interval_bytes",
        "preallocate": "preallocate",
        "max.message.bytes": "max_message_bytes",
        "message.timestamp.type": "message_timestamp_type",
        "message.timestamp.difference.max.ms": "message_timestamp_difference_max_ms",
        "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
        "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
        "retention.ms": "retention_ms",
        "retention.bytes": "retention_bytes",
        "cleanup.policy": "cleanup_policy",
        "delete.retention.ms": "delete_retention_ms",
        "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
        "min.compaction.lag.ms": "min_compaction_lag_ms",
        "max.compaction.lag.ms": "max_compaction_lag_ms",
        "file.delete.delay.ms": "file_delete_delay_ms",
        "flush.messages": "flush_messages",
        "flush.ms": "flush_ms",
        "compression.type": "compression_type",
        "min.insync.replicas": "min_insync_replicas",
        "message.downconversion.enable": "message_downconversion_enable",
    }

    @cached_property
    def max_offset_index_size(self) -> int:
        return max_index_size(self.segment_index_bytes, OFFSET_ENTRY_SIZE)

    @cached_property
    def max_time_index_size(self) -> int:
        return max_index_size(self.segment_index_bytes, TIME_ENTRY_SIZE)

    @cached_property
    def timestamp_before_max_ms(self) -> int:
        """How far in the past a CreateTime record may be (Kafka's LogConfig
        .getMessageTimestampBeforeMaxMs): message.timestamp.before.max.ms, or while that is at
        its default (Long.MAX_VALUE) the deprecated message.timestamp.difference.max.ms."""
        before = self.message_timestamp_before_max_ms
        return before if before != LONG_MAX else self.message_timestamp_difference_max_ms

    @cached_property
    def timestamp_after_max_ms(self) -> int:
        """How far in the future a CreateTime record may be (getMessageTimestampAfterMaxMs)."""
        after = self.message_timestamp_after_max_ms
        return after if after != LONG_MAX else self.message_timestamp_difference_max_ms

    @cached_property
    def target_codec(self) -> int | None:
        """The codec appended batches must have (compression.type), None for ``producer``
        (the batch keeps the producer's); ``uncompressed`` (or ``none``) is NONE."""
        name = self.compression_type.strip().lower()
        return None if name == "producer" else codec_from_name(name)

    @cached_property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @cached_property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @cached_property
    def effective_segment_ms(self) -> int:
        # Compacted topics roll at least every max.compaction.lag.ms.
        return min(self.segment_ms, self.max_compaction_lag_ms) if self.compact else self.segment_ms

    def with_overrides(self, overrides: dict[str, str | int]) -> LogConfig:
        """Apply Kafka-named overrides (``{"segment.bytes": "1024"}``)."""
        kinds = {f.name: f.type for f in fields(self)}
        changes = {}
        for name, value in overrides.items():
            attr = self.NAMES.get(name, name.replace(".", "_"))
            if attr not in kinds:
                raise ValueError(f"unknown log config {name!r}")
            current = getattr(self, attr)
            if isinstance(current, bool):
                changes[attr] = str(value).lower() == "true" if isinstance(value, str) else bool(value)
            elif isinstance(current, tuple):  # a LIST: "" is the empty list (ConfigDef.parseType)
                if not isinstance(value, str):
                    changes[attr] = value
                else:
                    changes[attr] = tuple(v.strip() for v in value.split(",")) if value.strip() else ()
            elif isinstance(current, float):
                changes[attr] = float(value)
            elif isinstance(current, int):
                changes[attr] = int(value)
            else:
                changes[attr] = str(value)
        return replace(self, **changes)
