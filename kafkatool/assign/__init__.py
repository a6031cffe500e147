"""Replica placement and partition reassignment.

Kafka's own placement (``kafka_placement``), planners that move as little as
possible (``minimal``) or balance bytes (``by_size``), replication-factor changes
(``factor``), leadership demotion by replica order (``demote``), plan reports (``plan``),
the reassignment JSON formats (``formats``), throttle bookkeeping
(``throttle``) and the ZooKeeper side of execute/verify/cancel/list
(``zk_reassign``).
"""
