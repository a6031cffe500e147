"""``reassign generate --demote-brokers``: move preferred leadership off brokers before their
maintenance without moving data (Cruise Control's demote_broker, as a reassignment plan).

Cruise Control's rule (PreferredLeaderElectionGoal with exclude_follower_demotion=false):
every replica on a demoted broker moves to the end of its partition's replica list
(Partition.moveReplicaToEnd), so a demoted broker is the preferred leader of no partition that
has another replica, and comes last in the order an election after a failure takes (the first
live in-sync replica), also after later preferred leader elections.  Here:

- A partition whose preferred leader (first replica) is not demoted keeps it; its demoted
  followers move to the end.  That needs no ISR: the preferred leader does not change.
- A partition whose preferred leader is demoted gets a new first replica: the live, in-sync
  replica on a non-demoted broker that keeps preferred leaders best balanced (fewest preferred
  leaders so far, then its place in the list; partitions with the fewest candidates choose
  first) where Cruise Control takes the first remaining replica; a preferred election only
  elects an in-sync replica, so an out-of-sync one would leave the demoted broker leading.
- Then the other non-demoted replicas, then the demoted ones, each group in its old order
  (Cruise Control orders the demoted ones by the order it visits the brokers).
- A partition whose every replica is demoted is left as it is (Cruise Control leaves the
  leader on a demoted broker and warns), as is one whose preferred leader is demoted with no
  live in-sync replica elsewhere, or an unknown ISR: each is reported with the reason.
  Cruise Control by default (skip_urp_demotion=true) leaves every under-replicated partition
  alone; here only the new preferred leader must be in sync.

With ``followers=False`` (``--exclude-follower-demotion``; Cruise Control's default,
exclude_follower_demotion=true) only partitions whose preferred leader is demoted change: the
new preferred leader (chosen as above) first, the demoted one last, every other replica in its
old place in the order, demoted followers included; where a demoted broker is only a follower
nothing changes.  Cruise Control moves only the replica leading now to the end; here it is the
preferred leader that moves, which is the one a preferred election makes the leader (a
partition a demoted broker leads after a failover, with another first replica, needs only the
election, below).

The replica set never changes.  Executed, the plan changes only the replica order; a preferred
leader election (``kafkatool leader-election --election-type preferred``) then moves
leadership, on ``Demotion.elect``: the partitions whose preferred leader changes, and those a
demoted broker leads now (after a failover) whose first replica is not demoted (with the
current leaders unknown, every partition is assumed led by its first replica).
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
    elect: list[TopicPartition] = field(default_factory=list)  # where a preferred election is due


def plan_demotion(
    current: Mapping[TopicPartition, Sequence[int]],
    demoted: Collection[int],
    isr: Mapping[TopicPartition, Sequence[int] | None] | None = None,
    live: Collection[int] | None = None,
    leaders: Mapping[TopicPartition, int | None] | None = None,
    followers: bool = True,
) -> Demotion:
    """``isr`` None: unknown for every partition, all replicas assumed in sync; a partition
    missing from it (or mapped to None) has no known ISR and is left if its preferred leader is
    demoted.  ``live``: the registered brokers, when known (a preferred election elects only a
    live replica).  ``leaders``: each partition's current leader, when known (None or missing:
    assumed its first replica).  ``followers`` False (--exclude-follower-demotion): demoted
    followers keep their places (see the module's doc)."""
    demoted = set(demoted)
    led: dict[int, int] = {}
    for replicas in current.values():
        if replicas:
            led[replicas[0]] = led.get(replicas[0], 0) + 1
    result = Demotion()
    choices: list[tuple[TopicPartition, list[int]]] = []
    for tp in sorted(current):
        replicas = list(current[tp])
        if not any(b in demoted for b in replicas):
            continue
        others = [b for b in replicas if b not in demoted]
        in_sync = None if isr is None else isr.get(tp)
        if not others:
            result.left.append(
                LeftPartition(tp, replicas, _list(in_sync), "every replica is on a demoted broker")
            )
            continue
        if replicas[0] not in demoted:
            if not followers:
                continue
            order = others + [b for b in replicas if b in demoted]
            if order != replicas:
                result.proposed[tp] = order
            continue
        if isr is not None and in_sync is None:
            result.left.append(LeftPartition(tp, replicas, None, "its ISR is unknown (no partition state)"))
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
        new_leader = min(candidates, key=lambda b: (led.get(b, 0), replicas.index(b)))
        led[replicas[0]] -= 1
        led[new_leader] = led.get(new_leader, 0) + 1
        rest = [b for b in replicas if b != new_leader]
        if followers:
            result.proposed[tp] = (
                [new_leader] + [b for b in rest if b not in demoted] + [b for b in rest if b in demoted]
            )
        else:
            result.proposed[tp] = [new_leader] + [b for b in rest if b != replicas[0]] + [replicas[0]]
    result.proposed = dict(sorted(result.proposed.items()))
    left = {x.tp for x in result.left}
    for tp in sorted(current):
        replicas = list(current[tp])
        if tp in left or not replicas:
            continue
        first = result.proposed.get(tp, replicas)[0]
        leader = replicas[0] if leaders is None or leaders.get(tp) is None else leaders[tp]
        if first != replicas[0] or (leader in demoted and first != leader):
            result.elect.append(tp)
    return result


def _list(values: Sequence[int] | None) -> list[int] | None:
    return None if values is None else list(values)
