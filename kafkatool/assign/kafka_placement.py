"""Kafka's replica placement (AdminUtils.assignReplicasToBrokers), bit for bit.

Rack-unaware and rack-aware, with the start index and replica shift exposed:
Kafka draws both from an unseeded ``java.util.Random`` (two independent
``nextInt(n)`` calls, start first); a fixed start index fixes the shift too.
``JavaRandom`` reproduces ``java.util.Random`` so a seed gives the same draws
a JVM would.  See notes/ops.md section 2 for the rules stated precisely.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkatool.assign.errors import AssignError
from kafkatool.assign.model import Broker, check_racks

_MULTIPLIER = 0x5DEECE66D
_ADDEND = 0xB
_MASK = (1 << 48) - 1


class JavaRandom:
    """``java.util.Random``: the 48-bit LCG and its ``nextInt(bound)``."""

    def __init__(self, seed: int):
        self._seed = (seed ^ _MULTIPLIER) & _MASK

    def _next(self, bits: int) -> int:
        self._seed = (self._seed * _MULTIPLIER + _ADDEND) & _MASK
        value = self._seed >> (48 - bits)
        if value >= 1 << 31:  # Java's (int) cast
            value -= 1 << 32
        return value

    def next_int(self, bound: int) -> int:
        if bound <= 0:
            raise ValueError("bound must be positive")
        r = self._next(31)
        m = bound - 1
        if bound & m == 0:
            return (bound * r) >> 31
        u = r
        while True:
            r = u % bound
            if u - r + m < 1 << 31:  # no int overflow in Java's check
                return r
            u = self._next(31)


def rack_alternated_brokers(brokers: Sequence[Broker]) -> list[int]:
    """Kafka's getRackAlternatedBrokerList: racks sorted by name, ids sorted within a rack,
    then one broker from each rack in turn, skipping exhausted racks."""
    by_rack: dict[str, list[int]] = {}
    for b in brokers:
        by_rack.setdefault(b.rack or "", []).append(b.id)
    racks = sorted(by_rack)
    queues = {r: sorted(ids) for r, ids in by_rack.items()}
    positions = dict.fromkeys(racks, 0)
    result: list[int] = []
    i = 0
    while len(result) < len(brokers):
        rack = racks[i]
        if positions[rack] < len(queues[rack]):
            result.append(queues[rack][positions[rack]])
            positions[rack] += 1
        i = (i + 1) % len(racks)
    return result


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def draw_start_and_shift(n_brokers: int, rng: JavaRandom) -> tuple[int, int]:
    """The two draws Kafka makes for one call when no start index is fixed."""
    start = rng.next_int(n_brokers)
    shift = rng.next_int(n_brokers)
    return start, shift


def assign_replicas(
    brokers: Sequence[Broker],
    n_partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    shift: int | None = None,
    first_partition: int = 0,
    rng: JavaRandom | None = None,
    rack_aware: bool = True,
) -> dict[int, list[int]]:
    """partition id -> replicas, as AdminUtils computes them.

    ``start_index`` alone behaves like Kafka's fixedStartIndex (the shift is the
    same value); give ``shift`` as well to pin both independently.  Without a
    start index both come from ``rng`` (start first, then shift), as in Kafka.
    """
    validate_placement_args(brokers, n_partitions, replication_factor)
    rack_aware = check_racks(brokers, rack_aware=rack_aware)
    n = len(brokers)
    if start_index is None:
        if shift is not None:
            raise AssignError("a replica shift needs a start index")
        if rng is None:
            raise AssignError("no start index and no random source")
        start_index, shift = draw_start_and_shift(n, rng)
    elif start_index < 0:
        raise AssignError(f"start index {start_index} is negative")
    if shift is None:
        shift = start_index
    if shift < 0:
        raise AssignError(f"replica shift {shift} is negative")
    first_partition = max(first_partition, 0)

    if rack_aware:
        order = rack_alternated_brokers(brokers)
        rack_of = {b.id: b.rack for b in brokers}
        n_racks = len(set(rack_of.values()))
    else:
        order = [b.id for b in brokers]
    result: dict[int, list[int]] = {}
    for pid in range(first_partition, first_partition + n_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start_index) % n
        leader = order[first]
        replicas = [leader]
        if not rack_aware:
            replicas += [order[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)]
        else:
            racks_used = {rack_of[leader]}
            chosen = {leader}
            k = 0
            for _ in range(replication_factor - 1):
                while True:
                    candidate = order[_replica_index(first, shift * n_racks, k, n)]
                    k += 1
                    rack = rack_of[candidate]
                    if (rack not in racks_used or len(racks_used) == n_racks) and (
                        candidate not in chosen or len(chosen) == n
                    ):
                        replicas.append(candidate)
                        racks_used.add(rack)
                        chosen.add(candidate)
                        break
        result[pid] = replicas
    return result


def replication_factor_error(replication_factor: int, n_brokers: int) -> str | None:
    """AdminUtils.assignReplicasToBrokers' replication-factor preconditions, in the words of its
    InvalidReplicationFactorException (None: the factor can be placed on ``n_brokers``)."""
    if replication_factor <= 0:
        return "Replication factor must be larger than 0."
    if replication_factor > n_brokers:
        return f"Replication factor: {replication_factor} larger than available brokers: {n_brokers}."
    return None


def validate_placement_args(brokers: Sequence[Broker], n_partitions: int, replication_factor: int) -> None:
    if n_partitions <= 0:
        raise AssignError("Number of partitions must be larger than 0.")
    message = replication_factor_error(replication_factor, len(brokers))
    if message is not None:
        raise AssignError(message)
    ids = [b.id for b in brokers]
    dups = sorted({i for i in ids if ids.count(i) > 1})
    if dups:
        raise AssignError(f"broker list contains duplicate entries: {','.join(map(str, dups))}")


def add_partitions_start_index(broker_ids: Sequence[int], partition0_replicas: Sequence[int]) -> int:
    """ZooKeeper-mode add-partitions (AdminZkClient.createPartitions): the first new
    partition's leader is the first broker, in the sorted id list, whose id is at least
    partition 0's first replica (0 when none is)."""
    return next((i for i, b in enumerate(broker_ids) if b >= partition0_replicas[0]), 0)


def reassign_as_kafka(
    current: dict[tuple[str, int], list[int]],
    brokers: Sequence[Broker],
    *,
    seed: int | None,
    start_index: int | None = None,
    replication_factor: int | None = None,
) -> dict[tuple[str, int], list[int]]:
    """kafka-reassign-partitions.sh --generate: every topic placed afresh with Kafka's
    algorithm over ``brokers``, topic by topic in name order, one java.util.Random(seed)
    drawing each topic's start index and shift (or a fixed ``start_index``).  Each topic keeps
    its replication factor (Kafka takes one partition's), or takes ``replication_factor``:
    AdminUtils places any factor from scratch."""
    by_topic: dict[str, dict[int, list[int]]] = {}
    for (t, p), r in current.items():
        by_topic.setdefault(t, {})[p] = r
    rng = JavaRandom(seed) if start_index is None else None
    proposed = {}
    for topic in sorted(by_topic):
        parts = by_topic[topic]
        rfs = sorted({len(r) for r in parts.values()}) if replication_factor is None else [replication_factor]
        if len(rfs) > 1:
            raise AssignError(
                f"topic {topic} has partitions with different replication factors ({','.join(map(str, rfs))}); "
                "Kafka's placement takes one (use --strategy minimal)"
            )
        ids = sorted(parts)
        if ids != list(range(len(ids))):
            raise AssignError(f"topic {topic}: partition ids are not 0..{len(ids) - 1}")
        try:
            placed = assign_replicas(brokers, len(ids), rfs[0], start_index=start_index, rng=rng)
        except AssignError as exc:
            raise AssignError(f"topic {topic}: {exc}") from None
        for p, r in placed.items():
            proposed[(topic, p)] = r
    return proposed
