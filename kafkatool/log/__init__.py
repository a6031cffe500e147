"""The storage engine on files: segments, partition logs, log dirs, recovery, retention, cleaning.

Layers (Kafka's names in brackets), each usable on its own:

- ``file_records.FileRecords`` [FileRecords]: a read-only map of a ``.log``.
- ``indexes`` [OffsetIndex, TimeIndex, TransactionIndex]: the index files,
  preallocated and trimmed as Kafka does.
- ``segment.Segment`` [LogSegment]: one ``.log`` with its indexes: ``append``,
  ``read`` (file slices for sendfile), ``translate_offset``, ``recover``,
  ``truncate_to``, ``on_become_inactive`` (roll), ``change_file_suffixes``
  (``.cleaned``/``.swap``/``.deleted``), ``largest_timestamp`` (retention).
  ``segment.scan_for_recovery`` is the recovery pass as a pure function.
- ``log.Log`` [LocalLog + UnifiedLog + LogLoader]: one partition dir: offsets,
  rolling, reads, flush, truncation, ``delete_segments`` (retention's deletion
  dance), ``replace_segments`` (the cleaner's swap), ``increment_log_start_offset``,
  producer state (``producer_state``), leader epochs (``leader_epoch``),
  ``partition.metadata``, append listeners.
- ``manager.LogManager`` [LogManager]: several log dirs, ``.lock``
  (``lock``), checkpoints, the clean-shutdown marker.
- ``recovery`` / ``rebuild``: the ``recover`` and ``rebuild-index`` tools.
- ``fileops``: every directory-changing file operation (atomic writes, renames,
  deletes) and its fault-injection point for crash tests.
"""
