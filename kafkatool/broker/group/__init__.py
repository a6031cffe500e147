"""The classic group coordinator: membership, rebalances, committed offsets, ``__consumer_offsets``."""
