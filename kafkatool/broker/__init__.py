"""The single-node Kafka-compatible broker (``kafkatool serve``): network layer, router, API handlers,
embedded cluster metadata, background retention and compaction."""
