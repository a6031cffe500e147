"""The replication throttles kafka-reassign-partitions sets, computed the same way.

- Topic configs (SET, replacing the old list), for every topic with a partition
  in the move map (the submitted partitions plus every reassignment already in
  flight): ``leader.replication.throttled.replicas`` = ``p:b`` for each source
  replica, ``follower.replication.throttled.replicas`` = ``p:b`` for each
  destination that is not a source.  Entries are sorted as strings and joined
  with ``,`` (Kafka collects them in a TreeSet<String>); the value may be empty.
- Broker configs: ``leader.replication.throttled.rate`` and
  ``follower.replication.throttled.rate`` = the rate on every source and
  destination broker; ``replica.alter.log.dirs.io.max.bytes.per.second`` on
  brokers with log-dir pins.
- Sources of a partition already reassigning are its replicas minus the adding
  ones; otherwise its current replicas.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafkatool.assign.model import TopicPartition

LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LOG_DIRS_THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"

TOPIC_THROTTLE_KEYS = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)
BROKER_THROTTLE_KEYS = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE, LOG_DIRS_THROTTLE)


@dataclass
class PartitionMove:
    sources: set[int]
    destinations: set[int]


@dataclass
class InFlight:
    """A reassignment in progress: all replicas (target + leaving) and the adding ones."""

    replicas: list[int]
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)


def move_map(
    proposed: Mapping[TopicPartition, list[int]],
    current: Mapping[TopicPartition, list[int]],
    in_flight: Mapping[TopicPartition, InFlight] | None = None,
) -> dict[str, dict[int, PartitionMove]]:
    """Kafka's calculateProposedMoveMap."""
    moves: dict[str, dict[int, PartitionMove]] = {}
    for (topic, p), r in (in_flight or {}).items():
        moves.setdefault(topic, {})[p] = PartitionMove(set(r.replicas) - set(r.adding), set(r.adding))
    for (topic, p), replicas in proposed.items():
        part_moves = moves.setdefault(topic, {})
        if p in part_moves:
            sources = set(part_moves[p].sources)
        elif (topic, p) in current:
            sources = set(current[(topic, p)])
        else:
            raise ValueError(f"trying to reassign a topic partition {topic}-{p} with 0 replicas")
        part_moves[p] = PartitionMove(sources, set(replicas) - sources)
    return moves


def leader_throttles(moves: Mapping[str, Mapping[int, PartitionMove]]) -> dict[str, str]:
    return {
        topic: ",".join(sorted({f"{p}:{b}" for p, m in parts.items() for b in m.sources}))
        for topic, parts in moves.items()
    }


def follower_throttles(moves: Mapping[str, Mapping[int, PartitionMove]]) -> dict[str, str]:
    return {
        topic: ",".join(
            sorted({f"{p}:{b}" for p, m in parts.items() for b in m.destinations if b not in m.sources})
        )
        for topic, parts in moves.items()
    }


def reassigning_brokers(moves: Mapping[str, Mapping[int, PartitionMove]]) -> list[int]:
    brokers: set[int] = set()
    for parts in moves.values():
        for m in parts.values():
            brokers |= m.sources | m.destinations
    return sorted(brokers)


@dataclass
class ThrottleSettings:
    """What to SET: topic -> {key: value} and broker -> {key: value}."""

    topics: dict[str, dict[str, str]] = field(default_factory=dict)
    brokers: dict[int, dict[str, str]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "topics": {t: dict(c) for t, c in sorted(self.topics.items())},
            "brokers": {str(b): dict(c) for b, c in sorted(self.brokers.items())},
        }


def compute_throttles(
    proposed: Mapping[TopicPartition, list[int]],
    current: Mapping[TopicPartition, list[int]],
    *,
    rate: int | None,
    in_flight: Mapping[TopicPartition, InFlight] | None = None,
    log_dir_rate: int | None = None,
    log_dir_brokers: Iterable[int] = (),
) -> ThrottleSettings:
    settings = ThrottleSettings()
    if rate is not None and rate >= 0:
        moves = move_map(proposed, current, in_flight)
        leaders, followers = leader_throttles(moves), follower_throttles(moves)
        for topic in sorted(set(leaders) | set(followers)):
            settings.topics[topic] = {
                LEADER_THROTTLED_REPLICAS: leaders.get(topic, ""),
                FOLLOWER_THROTTLED_REPLICAS: followers.get(topic, ""),
            }
        for b in reassigning_brokers(moves):
            settings.brokers.setdefault(b, {}).update(
                {LEADER_THROTTLED_RATE: str(rate), FOLLOWER_THROTTLED_RATE: str(rate)}
            )
    if log_dir_rate is not None and log_dir_rate >= 0:
        for b in sorted(set(log_dir_brokers)):
            settings.brokers.setdefault(b, {})[LOG_DIRS_THROTTLE] = str(log_dir_rate)
    return settings


def clear_targets(
    live_brokers: Iterable[int], target_parts: Mapping[TopicPartition, list[int]]
) -> tuple[list[int], list[str]]:
    """Where Kafka's clearAllThrottles deletes keys: every live broker plus the brokers named
    in the file (all broker keys), and the file's topics (both topic keys)."""
    brokers = set(live_brokers)
    for replicas in target_parts.values():
        brokers.update(replicas)
    return sorted(brokers), sorted({tp[0] for tp in target_parts})
