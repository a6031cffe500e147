"""``reassign generate --demote-brokers``: move preferred leadership off brokers before their
maintenance without moving data (Cruise Control's demote_broker, as a reassignment plan).

Each partition whose preferred leader (first replica) is a demoted broker gets a new replica
order: first the live, in-sync replica on a non-demoted broker that keeps preferred leaders best
balanced (fewest preferred leaders so far, then its place in the list), then the other
non-demoted replicas, then the demoted ones (so an election after a failure, which takes
the first live in-sync replica in assignment order, also avoids them), each group in its
old order.  The replica set never changes.  Partitions with the fewest candidates choose
first.  A partition with no candidate is left as it is, with the reason.

Executed, the plan changes only the replica order; a preferred leader election
(``kafkatool leader-election --election-type preferred``) then moves leadership.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from kafkatool.assign.model import TopicPartition


@dataclass
class LeftPartition:
    tp: TopicPartition
    replicas: list[int]
    isr: list[int] | None  # None: ISR unknown, all replicas assumed in sync
    reason: str


@dataclass
class Demotion:
    proposed: dict[TopicPartition, list[int]] = field(default_factory=dict)  # changed partitions only
    left: list[LeftPartition] = field(default_factory=list)


def plan_demotion(
    current: Mapping[TopicPartition, Sequence[int]],
    demoted: Collection[int],
    isr: Mapping[TopicPartition, Sequence[int] | None] | None = None,
    live: Collection[int] | None = None,
) -> Demotion:
    """``isr`` None: unknown for every partition, all replicas assumed in sync; a partition
    missing from it (or mapped to None) has no known ISR and is left.  ``live``: the registered
    brokers, when known (a preferred election elects only a live replica)."""
    demoted = set(demoted)
    leaders: dict[int, int] = {}
    for replicas in current.values():
        if replicas:
            leaders[replicas[0]] = leaders.get(replicas[0], 0) + 1
    result = Demotion()
    choices: list[tuple[TopicPartition, list[int]]] = []
    for tp in sorted(current):
        replicas = list(current[tp])
        if not replicas or replicas[0] not in demoted:
            continue
        in_sync = None if isr is None else isr.get(tp)
        if isr is not None and in_sync is None:
            result.left.append(LeftPartition(tp, replicas, None, "its ISR is unknown (no partition state)"))
            continue
        others = [b for b in replicas if b not in demoted]
        if not others:
            result.left.append(
                LeftPartition(tp, replicas, _list(in_sync), "every replica is on a demoted broker")
            )
            continue
        candidates = [b for b in others if in_sync is None or b in in_sync]
        if not candidates:
            result.left.append(
                LeftPartition(
                    tp,
                    replicas,
                    _list(in_sync),
                    f"no replica outside the demoted brokers is in sync (ISR {_list(in_sync)})",
                )
            )
            continue
        alive = [b for b in candidates if live is None or b in live]
        if not alive:
            result.left.append(
                LeftPartition(
                    tp,
                    replicas,
                    _list(in_sync),
                    f"no in-sync replica outside the demoted brokers is alive (candidates {candidates})",
                )
            )
            continue
        choices.append((tp, alive))
    for tp, candidates in sorted(choices, key=lambda c: (len(c[1]), c[0])):
        replicas = list(current[tp])
        new_leader = min(candidates, key=lambda b: (leaders.get(b, 0), replicas.index(b)))
        leaders[replicas[0]] -= 1
        leaders[new_leader] = leaders.get(new_leader, 0) + 1
        rest = [b for b in replicas if b != new_leader]
        result.proposed[tp] = (
            [new_leader] + [b for b in rest if b not in demoted] + [b for b in rest if b in demoted]
        )
    result.proposed = dict(sorted(result.proposed.items()))
    return result


def _list(values: Sequence[int] | None) -> list[int] | None:
    return None if values is None else list(values)
