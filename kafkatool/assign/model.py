"""Brokers, topic-partitions and assignments as the planners see them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kafkatool.assign.errors import AssignError

TopicPartition = tuple[str, int]
#: topic-partition -> replica list (index 0 is the preferred leader)
Assignment = dict[TopicPartition, list[int]]


@dataclass(frozen=True)
class Broker:
    id: int
    rack: str | None = None


def tp_str(tp: TopicPartition) -> str:
    """Kafka's TopicPartition.toString: ``topic-partition``."""
    return f"{tp[0]}-{tp[1]}"


def parse_broker_list(text: str) -> list[Broker]:
    """``0,1,2`` or ``0:r1,1:r2,...`` (order kept, as Kafka's tool keeps ``--broker-list``)."""
    brokers: list[Broker] = []
    seen: set[int] = set()
    for i, item in enumerate(text.split(",")):
        item = item.strip()
        if not item:
            raise AssignError(f"broker list {text!r}: empty entry at position {i}")
        ident, sep, rack = item.partition(":")
        try:
            bid = int(ident)
        except ValueError:
            raise AssignError(f"broker list {text!r}: {ident!r} is not a broker id") from None
        if bid < 0:
            raise AssignError(f"broker list {text!r}: broker id {bid} is negative")
        if sep and not rack:
            raise AssignError(f"broker list {text!r}: empty rack for broker {bid}")
        if bid in seen:
            raise AssignError(f"broker list contains duplicate entries: {bid}")
        seen.add(bid)
        brokers.append(Broker(bid, rack if sep else None))
    return brokers


def check_racks(brokers: Iterable[Broker], *, rack_aware: bool = True) -> bool:
    """True when placement is rack-aware; raise when only some brokers have a rack."""
    brokers = list(brokers)
    if not rack_aware:
        return False
    missing = [b.id for b in brokers if b.rack is None]
    if not missing:
        return bool(brokers)
    if len(missing) == len(brokers):
        return False
    raise AssignError(
        "not all brokers have rack information (no rack on broker"
        f"{'s' if len(missing) > 1 else ''} {','.join(map(str, sorted(missing)))}); "
        "give every broker a rack or use --disable-rack-aware"
    )
