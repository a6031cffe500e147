"""``--strategy minimal``: balance replica and leader counts per broker (and so per rack)
while moving as few replicas as possible.

1. Exact per-broker replica targets: rack totals as close to proportional to
   the rack's broker count as the rack rule allows (water-filling between the
   least and most replicas a rack can hold), then floor/ceil within the rack;
   the extra "+1" slots go to the brokers that hold the most already, which
   makes the number of moves the sum of the excesses, the least possible.
2. Replicas leave non-target brokers and partitions spanning too few racks are
   spread (both needed whatever the balance).
3. Each move takes a replica from a broker above its target to one below it
   (same rack first), preferring the replica whose move also helps the
   leader and per-topic balance; when no direct move keeps the rack rule, a
   two-step move through a broker at target.
4. Preferred leaders are evened out by reordering replica lists (no data moves).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction

from kafkatool.assign.balance import ClusterState
from kafkatool.assign.model import Broker, TopicPartition


def plan_minimal(
    current: Mapping[TopicPartition, Sequence[int]],
    brokers: Sequence[Broker],
    *,
    rack_aware: bool = True,
    other_racks: Mapping[int, str | None] | None = None,
    balance_leaders: bool = True,
) -> dict[TopicPartition, list[int]]:
    """The new assignment of every partition in ``current`` (unchanged ones included)."""
    state = ClusterState(current, brokers, rack_aware=rack_aware, other_racks=other_racks)
    load = fair_share_load(state)
    state.evacuate(load)
    state.fix_racks(load)
    # The forced moves are done: hand the "+1" slots to the brokers that hold most now.
    balance_counts(state, replica_targets(state))
    if balance_leaders:
        state.balance_leaders()
    return state.assignment()


def fair_share_load(state: ClusterState, factor: int | None = None) -> Callable[[int], tuple]:
    """A broker's load as the count planners rank it, read live: how far above its fair share
    (``replica_targets``, every partition at ``factor`` replicas if given) the broker's rack is,
    then the broker itself."""
    ideal = replica_targets(state, fractional=True, factor=factor)
    rack_members: dict[object, list[int]] = {}
    for b in state.targets:
        rack_members.setdefault(state.rack_of.get(b) if state.rack_aware else None, []).append(b)

    def load(b: int) -> tuple:
        members = rack_members.get(state.rack_of.get(b) if state.rack_aware else None, [b])
        rack_over = sum(state.count.get(m, 0) - ideal.get(m, 0) for m in members)
        return (rack_over, state.count.get(b, 0) - ideal.get(b, 0))

    return load


def replica_targets(
    state: ClusterState, *, fractional: bool = False, factor: int | None = None
) -> dict[int, float]:
    """Exact replica count per target broker (or its fair share, ``fractional``); with
    ``factor``, as if every partition had that many replicas."""
    rfs = [factor if factor is not None else len(r) for r in state.parts.values()]
    total = sum(rfs)
    groups: dict[object, list[int]] = {}
    for b in state.targets:
        groups.setdefault(state.rack_of.get(b) if state.rack_aware else None, []).append(b)
    group_totals = _group_totals(state, groups, total, rfs)
    targets: dict[int, float] = {}
    for key, members in groups.items():
        if fractional:
            targets.update(dict.fromkeys(members, group_totals[key] / len(members)))
            continue
        q, r = divmod(group_totals[key], len(members))
        ranked = sorted(members, key=lambda b: (-state.count.get(b, 0), b))
        for i, b in enumerate(ranked):
            targets[b] = q + (1 if i < r else 0)
    return targets


def _group_totals(
    state: ClusterState, groups: dict[object, list[int]], total: int, rfs: list[int]
) -> dict[object, int]:
    if len(groups) == 1:
        return {next(iter(groups)): total}
    n_racks = len(groups)
    lo = dict.fromkeys(groups, 0)
    hi = dict.fromkeys(groups, 0)
    for rf in rfs:
        for key, members in groups.items():
            if rf >= n_racks:
                lo[key] += 1
                hi[key] += min(len(members), rf - (n_racks - 1))
            else:
                hi[key] += 1
    size = {k: len(v) for k, v in groups.items()}
    shares = _water_fill(size, lo, hi, total)
    result = {k: min(math.floor(shares[k]), hi[k]) for k in groups}
    current = {k: sum(state.count.get(m, 0) for m in groups[k]) for k in groups}
    # The left-over replicas go to the racks holding most beyond their floor share (fewest moves),
    # then to the largest fractional shares.
    order = sorted(groups, key=lambda k: (-(current[k] - result[k]), -(shares[k] - int(shares[k])), str(k)))
    left = total - sum(result.values())
    while left > 0:
        progressed = False
        for k in order:
            if left and result[k] < hi[k]:
                result[k] += 1
                left -= 1
                progressed = True
        if not progressed:
            break
    return result


def _water_fill(
    size: Mapping[object, int], lo: Mapping[object, int], hi: Mapping[object, int], total: int
) -> dict[object, Fraction]:
    """Exact shares clamp(lam * size, lo, hi) summing to ``total`` (as far as the bounds allow)."""

    def filled(lam: Fraction) -> dict[object, Fraction]:
        return {k: min(max(lam * size[k], Fraction(lo[k])), Fraction(hi[k])) for k in size}

    points = sorted({Fraction(0)} | {Fraction(v, size[k]) for k in size for v in (lo[k], hi[k])})
    prev = points[0]
    for lam in points:
        if sum(filled(lam).values()) >= total:
            if lam == prev:
                return filled(lam)
            # filled() is linear between two breakpoints: solve for the crossing exactly
            mid = (prev + lam) / 2
            free = [k for k in size if lo[k] < mid * size[k] < hi[k]]
            base = filled(prev)
            fixed = sum((v for k, v in base.items() if k not in free), Fraction(0))
            slope = sum(size[k] for k in free)
            if not slope:
                return filled(lam)
            return filled((Fraction(total) - fixed) / slope)
        prev = lam
    return filled(points[-1])


def balance_counts(state: ClusterState, targets: Mapping[int, int], *, free_only: bool = False) -> None:
    """Move replicas from brokers above their target count to brokers below it.

    ``free_only``: only moves that copy nothing more than the plan already copies (a replica
    the plan added moves on, or a partition keeps a broker that held it instead of another
    that holds it), and never a preferred leader."""
    lo_lead, hi_lead = state.leader_bounds()

    def excess() -> dict[int, int]:
        return {b: c - targets.get(b, 0) for b, c in state.count.items() if c > targets.get(b, 0)}

    def deficit() -> dict[int, int]:
        return {
            b: targets[b] - state.count.get(b, 0) for b in state.targets if state.count.get(b, 0) < targets[b]
        }

    def wants_leader(src: int, dst: int) -> bool | None:
        """Should the next replica moved src -> dst be a leader (True), a follower (False)?"""
        ls, ld = state.leaders.get(src, 0), state.leaders.get(dst, 0)
        if ls > hi_lead or (ls > lo_lead and ld < lo_lead):
            return True
        if ls <= lo_lead or ld >= hi_lead:
            return False
        return None

    cost = state.copy_cost
    allowed = state.free_move if free_only else state.can_move

    def skew(topic: str, src: int, dst: int) -> int:
        return state.topic_count.get((topic, src), 0) - state.topic_count.get((topic, dst), 0)

    def move_batch(src: int, dst: int, k: int) -> int:
        """Move up to ``k`` replicas src -> dst.

        Free moves first: a replica this plan already moved can move on (or go home) without
        adding to the replicas moved.  Then the topic most skewed towards src, a leader or a
        follower as the leader balance asks, partitions not moved yet first (each keeps an
        original replica where it can)."""
        moved = 0
        cands = sorted(
            (tp for tp in state.on_broker.get(src, ()) if state.can_move(tp, src, dst)),
            key=lambda tp: (cost(tp, src, dst), state.parts[tp] != state.original[tp], tp),
        )
        paid = []
        for tp in cands:
            if cost(tp, src, dst) > 0:
                paid.append(tp)
            elif moved < k and allowed(tp, src, dst):
                state.move(tp, src, dst)
                moved += 1
        if free_only:
            return moved
        groups: dict[str, tuple[list, list]] = {}
        for tp in paid:
            groups.setdefault(tp[0], ([], []))[0 if state.parts[tp][0] == src else 1].append(tp)
        heap = [(-skew(t, src, dst), t) for t in groups]
        heapq.heapify(heap)
        while moved < k and heap:
            _, topic = heapq.heappop(heap)
            leaders, followers = groups[topic]
            want = wants_leader(src, dst)
            order = (leaders, followers) if want in (True, None) else (followers, leaders)
            for bucket in order:
                while bucket:
                    tp = bucket.pop(0)
                    if state.can_move(tp, src, dst):
                        state.move(tp, src, dst)
                        moved += 1
                        break
                else:
                    continue
                break
            if leaders or followers:
                heapq.heappush(heap, (-skew(topic, src, dst), topic))
        return moved

    def best(src: int, dst: int) -> TopicPartition | None:
        return next((tp for tp in sorted(state.on_broker.get(src, ())) if allowed(tp, src, dst)), None)

    def free_path(sources: list[int], sinks: set[int]) -> list[tuple[TopicPartition, int, int]] | None:
        """The shortest chain of free moves from a broker of ``sources`` to one of ``sinks``
        (each step a follower moving to a broker that held the partition, or a replica the plan
        added moving on)."""
        prev: dict[int, tuple[int, TopicPartition] | None] = dict.fromkeys(sources)
        queue = deque(sources)
        while queue:
            a = queue.popleft()
            for tp in sorted(state.on_broker.get(a, ())):
                replicas = state.parts[tp]
                if replicas[0] == a:
                    continue
                orig = state.original[tp]
                for c in orig if a in orig else state.targets:
                    if c in prev or c in replicas or not state.can_move(tp, a, c):
                        continue
                    prev[c] = (a, tp)
                    if c in sinks:
                        path = []
                        node = c
                        while prev[node] is not None:
                            a2, tp2 = prev[node]
                            path.append((tp2, a2, node))
                            node = a2
                        return path[::-1]
                    queue.append(c)
        return None

    for _ in range(sum(state.count.values()) + 1):
        ex, de = excess(), deficit()
        if not ex or not de:
            return
        done = False
        for src in sorted(ex, key=lambda b: (-ex[b], b)):
            same = state.rack_of.get(src)
            for dst in sorted(de, key=lambda d: (state.rack_of.get(d) != same, -de[d], d)):
                if move_batch(src, dst, min(ex[src], de[dst])):
                    done = True
                    break
            if done:
                break
        if done:
            continue
        if free_only:
            path = free_path(sorted(ex, key=lambda b: (-ex[b], b)), set(de))
            if path is None:
                return
            for tp, a, c in path:
                if not allowed(tp, a, c):
                    break
                state.move(tp, a, c)
            continue
        # No direct move keeps the rack rule: go through a broker that is at its target.
        for src in sorted(ex, key=lambda b: (-ex[b], b)):
            for dst in sorted(de, key=lambda d: (-de[d], d)):
                for mid in state.targets:
                    if mid in ex or mid in de:
                        continue
                    tp2 = best(mid, dst)
                    if tp2 is None:
                        continue
                    tp1 = next(
                        (
                            tp
                            for tp in sorted(state.on_broker.get(src, ()))
                            if tp != tp2 and allowed(tp, src, mid)
                        ),
                        None,
                    )
                    if tp1 is None:
                        continue
                    state.move(tp2, mid, dst)
                    state.move(tp1, src, mid)
                    done = True
                    break
                if done:
                    break
            if done:
                break
        if not done:
            return  # what is left cannot move without breaking the rack rule
