"""Find the Kafka roots (chroots) in a ZooKeeper ensemble that may hold several clusters.

A node X is a Kafka root when ``X/brokers/ids`` and ``X/brokers/topics`` exist
and one of ``X/cluster/id``, ``X/controller_epoch`` or ``X/config/changes`` does.
The search is breadth-first from the ensemble root, skips ``/zookeeper``, goes at
most ``max_depth`` levels deep and does not descend below a match.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kafkatool.zk import codecs, paths
from kafkatool.zk.client import KafkaZk


@dataclass
class KafkaRoot:
    chroot: str  # "/" for a cluster at the ensemble root
    cluster_id: str | None
    brokers: list[int]
    controller: int | None
    controller_epoch: int | None
    topics: int
    warnings: list[str] = field(default_factory=list)

    def connect_string(self, hosts: str) -> str:
        return hosts if self.chroot == "/" else hosts + self.chroot


def _child(base: str, name: str) -> str:
    return paths.join(base, name)


def _is_root(zk: KafkaZk, base: str) -> bool:
    if zk.exists(_child(base, "brokers/ids")) is None or zk.exists(_child(base, "brokers/topics")) is None:
        return False
    return any(
        zk.exists(_child(base, p)) is not None for p in ("cluster/id", "controller_epoch", "config/changes")
    )


def describe_root(zk: KafkaZk, base: str) -> KafkaRoot:
    """Summarize the Kafka root at ``base`` (a path relative to ``zk``'s own chroot)."""
    warnings: list[str] = []
    cluster_id = None
    node = zk.get_or_none(_child(base, "cluster/id"))
    if node is None:
        warnings.append("no /cluster/id (no broker of a version >= 0.10.1 has started here)")
    else:
        try:
            cluster_id = codecs.decode_cluster_id(node.data).id
        except codecs.ZkPayloadError as exc:
            warnings.append(f"undecodable /cluster/id: {exc}")
    brokers = []
    for name in zk.children_or_empty(_child(base, "brokers/ids")):
        try:
            brokers.append(int(name))
        except ValueError:
            warnings.append(f"non-numeric broker registration {name!r}")
    controller = None
    node = zk.get_or_none(_child(base, "controller"))
    if node is not None:
        try:
            controller = codecs.decode_controller(node.data).broker_id
        except codecs.ZkPayloadError as exc:
            warnings.append(f"undecodable /controller: {exc}")
    epoch = None
    node = zk.get_or_none(_child(base, "controller_epoch"))
    if node is not None:
        try:
            epoch = codecs.decode_controller_epoch(node.data)
        except codecs.ZkPayloadError as exc:
            warnings.append(f"undecodable /controller_epoch: {exc}")
    topics = len(zk.children_or_empty(_child(base, "brokers/topics")))
    return KafkaRoot(base, cluster_id, sorted(brokers), controller, epoch, topics, warnings)


def find_kafka_roots(zk: KafkaZk, *, start: str = "/", max_depth: int = 4) -> list[KafkaRoot]:
    """All Kafka roots at or below ``start`` (relative to ``zk``'s chroot), sorted by path."""
    found: list[KafkaRoot] = []
    queue: deque[tuple[str, int]] = deque([(paths.normalize(start), 0)])
    while queue:
        base, depth = queue.popleft()
        if _is_root(zk, base):
            found.append(describe_root(zk, base))
            continue
        if depth >= max_depth:
            continue
        for name in zk.children_or_empty(base):
            child = _child(base, name)
            if child == "/zookeeper":
                continue
            queue.append((child, depth + 1))
    found.sort(key=lambda r: r.chroot)
    # A bare /brokers at the ensemble root next to chrooted clusters usually means a broker
    # once started without its chroot in zookeeper.connect.
    if len(found) > 0 and not any(r.chroot == "/" for r in found) and zk.exists("/brokers") is not None:
        for r in found:
            r.warnings.append(
                "a stray /brokers exists at the ensemble root (a broker started without its chroot?)"
            )
    return found
