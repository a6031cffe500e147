"""``reassign generate --replication-factor N``: every partition gets exactly N replicas on the
target brokers, raising or lowering, with as little data copied as the change allows.

Kafka has no tool for it (operators hand-write the reassignment); this keeps what can stay:

1. Lowering drops replicas (no data moves): first those on brokers that are not targets
   (followers before the leader), then followers, never the preferred leader on a target,
   keeping the rack spread the partition has (up to N racks), from the most loaded broker.
2. Replicas left on non-target brokers move to targets (``ClusterState.evacuate``).
3. Raising adds followers after the kept replicas (the preferred leader stays first): to a
   rack the partition lacks while it spans fewer than min(N, racks) racks (Kafka's
   rack-aware rule), else to the least loaded broker (then the one with fewest preferred
   leaders, then fewest replicas of the topic).
4. Partitions still spanning too few racks are spread (``ClusterState.fix_racks``).
5. The balance is evened out by free moves only (``ClusterState.free_move``: an added
   replica moves on, or a partition keeps a broker it is dropping instead of one it keeps;
   preferred leaders never change): ``minimal`` the replica counts
   (``minimal.balance_counts``), ``size`` the bytes (``by_size.balance_bytes``, the pass
   ``--strategy size`` balances with, so the placement largest first in 3. is only its start).

Load is the count planners' (``minimal.fair_share_load``, with every partition at N) or, for
``size``, bytes per broker (then replicas); ``size`` takes partitions largest first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafkatool.assign.balance import ClusterState
from kafkatool.assign.by_size import balance_bytes
from kafkatool.assign.minimal import balance_counts, fair_share_load, replica_targets
from kafkatool.assign.model import Broker, TopicPartition

STRATEGIES = ("minimal", "size")


def plan_replication_factor(
    current: Mapping[TopicPartition, Sequence[int]],
    brokers: Sequence[Broker],
    factor: int,
    *,
    strategy: str = "minimal",
    sizes: Mapping[TopicPartition, int] | None = None,
    rack_aware: bool = True,
    other_racks: Mapping[int, str | None] | None = None,
) -> dict[TopicPartition, list[int]]:
    """The new assignment of every partition in ``current``, each with ``factor`` replicas."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy {strategy!r}")
    state = ClusterState(
        current,
        brokers,
        rack_aware=rack_aware,
        other_racks=other_racks,
        sizes=sizes if strategy == "size" else None,
        factor=factor,
    )
    if strategy == "size":

        def load(b: int) -> tuple:
            return (state.bytes.get(b, 0), state.count.get(b, 0))

        order = sorted(state.parts, key=lambda tp: (-state.size(tp), tp))
    else:
        load = fair_share_load(state, factor)
        order = list(state.parts)
    for tp in order:
        _trim(state, tp, factor, load)
    state.evacuate(load)
    for tp in order:
        _grow(state, tp, factor, load)
    state.fix_racks(load)
    if strategy == "minimal":
        balance_counts(state, replica_targets(state), free_only=True)
    else:
        balance_bytes(state, free_only=True)
    return state.assignment()


def _trim(state: ClusterState, tp: TopicPartition, factor: int, load: Callable[[int], Any]) -> None:
    replicas = state.parts[tp]
    while len(replicas) > factor:
        off = [b for b in replicas if b not in state.target_set]
        if off:
            # a replica that would have to move anyway: followers first, so that a kept replica,
            # which holds the data, leads when the leader goes
            victim = max(off, key=lambda b: (b != replicas[0], replicas.index(b)))
        else:
            # Keep the racks the replicas span (up to N): dropping never adds one, and a rack
            # with two replicas always has a follower to drop, so the leader stays.
            keep_racks = min(factor, state.distinct_racks(replicas)) if state.rack_aware else 0
            followers = [
                b for b in replicas[1:] if state.distinct_racks([r for r in replicas if r != b]) >= keep_racks
            ]
            victim = max(
                followers,
                key=lambda b: (load(b), state.topic_count.get((tp[0], b), 0), replicas.index(b), b),
            )
        state.drop(tp, victim)


def _grow(state: ClusterState, tp: TopicPartition, factor: int, load: Callable[[int], Any]) -> None:
    replicas = state.parts[tp]
    need_racks = min(factor, len(state.racks)) if state.rack_aware else 0
    while len(replicas) < factor:
        options = [d for d in state.targets if d not in replicas]
        present = {state.rack_key(b) for b in replicas}
        if len(present) < need_racks:
            options = [d for d in options if state.rack_key(d) not in present] or options
        dst = min(
            options,
            key=lambda d: (load(d), state.leaders.get(d, 0), state.topic_count.get((tp[0], d), 0), d),
        )
        state.add(tp, dst)
