"""What a plan moves: replicas, bytes, leaders, and the per-broker balance before and after."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafkatool.assign.model import Broker, TopicPartition


@dataclass
class BrokerLoad:
    broker: int
    rack: str | None = None
    replicas: int = 0
    leaders: int = 0
    bytes: int = 0


def broker_loads(
    assignment: Mapping[TopicPartition, list[int]],
    brokers: Iterable[Broker] = (),
    sizes: Mapping[TopicPartition, int] | None = None,
) -> dict[int, BrokerLoad]:
    """Replica, leader (preferred leader = first replica) and byte counts per broker.

    Every broker in ``brokers`` appears, loaded or not; brokers that only appear
    in the assignment are added without a rack."""
    sizes = sizes or {}
    loads = {b.id: BrokerLoad(b.id, b.rack) for b in brokers}
    for tp, replicas in assignment.items():
        size = sizes.get(tp, 0)
        for i, r in enumerate(replicas):
            load = loads.get(r)
            if load is None:
                load = loads[r] = BrokerLoad(r)
            load.replicas += 1
            load.bytes += size
            if i == 0:
                load.leaders += 1
    return dict(sorted(loads.items()))


@dataclass
class Spread:
    min: float
    max: float
    spread: float
    stdev: float

    def to_dict(self) -> dict:
        return {"min": self.min, "max": self.max, "spread": self.spread, "stdev": round(self.stdev, 3)}


def spread(values: list[float]) -> Spread:
    if not values:
        return Spread(0, 0, 0, 0.0)
    return Spread(min(values), max(values), max(values) - min(values), statistics.pstdev(values))


@dataclass
class PlanReport:
    partitions: int = 0  # partitions in the plan
    partitions_changed: int = 0  # replica list differs (set or order)
    partitions_moved: int = 0  # replica set differs
    replicas_moved: int = 0  # replicas created on a new broker
    bytes_moved: int = 0  # bytes copied to new replicas
    leaders_changed: int = 0  # preferred leader differs
    sizes_known: bool = False
    partitions_without_size: int = 0
    per_broker: list[dict] = field(default_factory=list)
    per_rack: list[dict] = field(default_factory=list)
    balance: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "partitions": self.partitions,
            "partitions_changed": self.partitions_changed,
            "partitions_moved": self.partitions_moved,
            "replicas_moved": self.replicas_moved,
            "bytes_moved": self.bytes_moved if self.sizes_known else None,
            "leaders_changed": self.leaders_changed,
            "partitions_without_size": self.partitions_without_size if self.sizes_known else None,
            "balance": self.balance,
            "per_broker": self.per_broker,
            "per_rack": self.per_rack,
        }


def replicas_moved(
    current: Mapping[TopicPartition, list[int]], proposed: Mapping[TopicPartition, list[int]]
) -> int:
    """Replicas that must be copied to a broker that does not hold them yet."""
    return sum(len(set(r) - set(current.get(tp, ()))) for tp, r in proposed.items())


def report(
    current: Mapping[TopicPartition, list[int]],
    proposed: Mapping[TopicPartition, list[int]],
    brokers: Iterable[Broker] = (),
    sizes: Mapping[TopicPartition, int] | None = None,
) -> PlanReport:
    """Diff ``proposed`` against ``current`` (partitions absent from ``proposed`` stay as they are).

    The balance figures cover the target brokers (``brokers``; all brokers seen
    when empty): min/max/spread/stdev of replicas, leaders and bytes."""
    brokers = list(brokers)
    after = dict(current)
    after.update(proposed)
    rep = PlanReport(partitions=len(proposed), sizes_known=sizes is not None)
    sizes_map = sizes or {}
    for tp, new in proposed.items():
        old = current.get(tp, [])
        if list(new) != list(old):
            rep.partitions_changed += 1
        added = set(new) - set(old)
        if added or set(old) != set(new):
            rep.partitions_moved += 1
        rep.replicas_moved += len(added)
        rep.bytes_moved += len(added) * sizes_map.get(tp, 0)
        if old and new and old[0] != new[0]:
            rep.leaders_changed += 1
        if sizes is not None and tp not in sizes_map:
            rep.partitions_without_size += 1
    before_loads = broker_loads(current, brokers, sizes_map)
    after_loads = broker_loads(after, brokers, sizes_map)
    racks = {b.id: b.rack for b in brokers}
    ids = sorted(set(before_loads) | set(after_loads))
    for bid in ids:
        b0 = before_loads.get(bid) or BrokerLoad(bid)
        b1 = after_loads.get(bid) or BrokerLoad(bid)
        row = {
            "broker": bid,
            "rack": racks.get(bid),
            "target": bid in racks if brokers else True,
            "replicas_before": b0.replicas,
            "replicas_after": b1.replicas,
            "leaders_before": b0.leaders,
            "leaders_after": b1.leaders,
        }
        if sizes is not None:
            row["bytes_before"] = b0.bytes
            row["bytes_after"] = b1.bytes
        rep.per_broker.append(row)
    if any(r is not None for r in racks.values()):
        by_rack: dict[str, dict] = {}
        for row in rep.per_broker:
            if row["rack"] is None:
                continue
            agg = by_rack.setdefault(row["rack"], {"rack": row["rack"], "brokers": 0})
            agg["brokers"] += 1
            for key, value in row.items():
                if key.endswith(("_before", "_after")):
                    agg[key] = agg.get(key, 0) + value
        rep.per_rack = [by_rack[r] for r in sorted(by_rack)]
    target_ids = [b.id for b in brokers] or ids
    metrics = ["replicas", "leaders"] + (["bytes"] if sizes is not None else [])
    for metric in metrics:
        rep.balance[metric] = {
            "before": spread(
                [getattr(before_loads.get(i) or BrokerLoad(i), metric) for i in target_ids]
            ).to_dict(),
            "after": spread(
                [getattr(after_loads.get(i) or BrokerLoad(i), metric) for i in target_ids]
            ).to_dict(),
        }
    return rep
