"""``--strategy size``: balance bytes per broker, moving few and well-chosen replicas.

Replicas leave non-target brokers and rack-rule violations are repaired first
(lightest destination), then greedy: from the heaviest broker to a lighter one,
move the replica whose size best halves their gap (the largest drop in the
variance of bytes per broker); where no single move helps, swap two replicas
(one each way, their sizes' difference nearest half the gap: Cruise Control's
inter-broker replica swap), until the spread is within ``tolerance`` of the
mean or neither helps.  Preferred leaders are then evened out by count.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence

from kafkatool.assign.balance import ClusterState
from kafkatool.assign.model import Broker, TopicPartition

DEFAULT_TOLERANCE = 0.02
_SCAN = 16  # replicas looked at on each side of the ideal size before giving up on a pair
_SWAP_GIVE = 64  # replicas of the heavier broker a swap looks at, spread over their sizes


def plan_by_size(
    current: Mapping[TopicPartition, Sequence[int]],
    brokers: Sequence[Broker],
    sizes: Mapping[TopicPartition, int],
    *,
    rack_aware: bool = True,
    other_racks: Mapping[int, str | None] | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    balance_leaders: bool = True,
    max_moves: int | None = None,
) -> dict[TopicPartition, list[int]]:
    state = ClusterState(current, brokers, rack_aware=rack_aware, other_racks=other_racks, sizes=sizes)
    state.evacuate(lambda b: state.bytes.get(b, 0))
    state.fix_racks(lambda b: state.bytes.get(b, 0))
    balance_bytes(
        state, tolerance=tolerance, max_moves=None if max_moves is None else max_moves - state.moves
    )
    if balance_leaders:
        state.balance_leaders()
    return state.assignment()


def balance_bytes(
    state: ClusterState,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    max_moves: int | None = None,
    free_only: bool = False,
) -> int:
    """The greedy pass: from the heaviest broker to a lighter one, move the replica whose size
    best halves their gap, or where no move helps swap two replicas (two moves), until the
    bytes per target broker are within ``tolerance`` of the mean apart or nothing helps (at
    most ``max_moves`` moves, by default four per replica).
    ``free_only``: only ``ClusterState.free_move``s (nothing copied beyond what the plan
    copies already, no preferred leader moved).  Returns the moves made."""
    allowed = state.free_move if free_only else state.can_move
    total = sum(state.bytes.get(b, 0) for b in state.targets)
    mean = total / len(state.targets)
    limit = max_moves if max_moves is not None else 4 * sum(len(r) for r in state.parts.values())

    def movable(tp: TopicPartition) -> list[int]:
        """The target brokers whose replica of ``tp`` may have a move (a superset: ``allowed``
        decides each one)."""
        replicas = state.parts[tp]
        if not free_only:
            return [b for b in replicas if b in by_size]
        orig = state.original[tp]
        dropped = any(b not in replicas for b in orig)
        return [b for b in replicas[1:] if b in by_size and (dropped or b not in orig)]

    # (size, tp) of every movable replica, sorted, per broker: the best replica for a gap is a
    # bisect away.
    by_size: dict[int, list[tuple[int, TopicPartition]]] = {b: [] for b in state.targets}
    for tp in state.parts:
        for b in movable(tp):
            by_size[b].append((state.size(tp), tp))
    for entries in by_size.values():
        entries.sort()
    moves = 0
    while moves < limit:
        ranked = sorted(state.targets, key=lambda b: (-state.bytes[b], b))
        if state.bytes[ranked[0]] - state.bytes[ranked[-1]] <= tolerance * mean:
            break
        move = _best_move(state, ranked, by_size, allowed)
        if move is not None:
            step = [move]
        elif moves + 2 <= limit:
            step = _best_swap(state, ranked, by_size, allowed)
            if step is None:
                break
        else:
            break
        for tp, src, dst in step:
            entry = (state.size(tp), tp)
            for b in movable(tp):
                by_size[b].pop(bisect.bisect_left(by_size[b], entry))
            state.move(tp, src, dst)
            for b in movable(tp):
                bisect.insort(by_size[b], entry)
            moves += 1
    return moves


def _best_move(
    state: ClusterState,
    ranked: list[int],
    by_size: dict[int, list[tuple[int, TopicPartition]]],
    allowed: Callable[[TopicPartition, int, int], bool],
) -> tuple[TopicPartition, int, int] | None:
    """The move with the largest variance drop from the heaviest broker that can give something
    to a lighter one: for each lighter broker, the movable replica nearest half their gap."""
    for src in ranked[:-1]:
        best: tuple[tuple, tuple[TopicPartition, int, int]] | None = None
        sizes = by_size[src]
        for dst in reversed(ranked):
            gap = state.bytes[src] - state.bytes[dst]
            if gap <= 0:
                break
            i = bisect.bisect_left(sizes, (gap // 2,))
            # the nearest movable replica below and above half the gap (sizes strictly inside (0, gap))
            for step, j in ((-1, i - 1), (1, i)):
                for _ in range(_SCAN):
                    if not 0 <= j < len(sizes):
                        break
                    s, tp = sizes[j]
                    if not 0 < s < gap:
                        if (step < 0 and s <= 0) or (step > 0 and s >= gap):
                            break
                    elif allowed(tp, src, dst):
                        key = (s * (gap - s), -state.count[dst], tp)
                        if best is None or key > best[0]:
                            best = (key, (tp, src, dst))
                        break
                    j += step
        if best is not None:
            return best[1]
    return None


def _best_swap(
    state: ClusterState,
    ranked: list[int],
    by_size: dict[int, list[tuple[int, TopicPartition]]],
    allowed: Callable[[TopicPartition, int, int], bool],
) -> list[tuple[TopicPartition, int, int]] | None:
    """Two moves where no single one helps: a replica from the heaviest broker that can give
    to a lighter one, and in exchange one from that lighter broker, whose sizes differ by
    about half their gap (strictly inside (0, gap): the gap shrinks by twice the difference).
    The two replicas are of different partitions, and neither is already on the other broker
    (``allowed`` checks each move against the state before both; the partitions differ, so
    neither move changes what the other is checked against).  Only swaps that lower the
    spread are looked for: the heaviest broker with each lighter one, else each heavier one
    with the lightest (2 x brokers pairs, not brokers squared)."""
    heaviest, lightest = ranked[0], ranked[-1]
    for pairs in (
        [(heaviest, dst) for dst in reversed(ranked[1:])],
        [(src, lightest) for src in ranked[1:-1]],
    ):
        best: tuple[tuple, list[tuple[TopicPartition, int, int]]] | None = None
        for src, dst in pairs:
            gap = state.bytes[src] - state.bytes[dst]
            if gap <= 0:
                continue
            give, take = by_size[src], by_size[dst]
            if not take:
                continue
            # at most _SWAP_GIVE replicas of src, spread over its sizes (a swap is looked for
            # when no move helps, near the end; this bounds each step on brokers of thousands)
            stride = max(1, len(give) // _SWAP_GIVE)
            for s_a, tp_a in give[::stride]:
                if not allowed(tp_a, src, dst):
                    continue
                # the replica on dst whose size is nearest s_a - gap / 2, sizes in (s_a - gap, s_a)
                want = s_a - gap // 2
                i = bisect.bisect_left(take, (want,))
                for step, j in ((-1, i - 1), (1, i)):
                    for _ in range(_SCAN):
                        if not 0 <= j < len(take):
                            break
                        s_b, tp_b = take[j]
                        d = s_a - s_b
                        if not 0 < d < gap:
                            if (step < 0 and d >= gap) or (step > 0 and d <= 0):
                                break
                        elif tp_b != tp_a and allowed(tp_b, dst, src):
                            key = (d * (gap - d), tp_a, tp_b)
                            if best is None or key > best[0]:
                                best = (key, [(tp_a, src, dst), (tp_b, dst, src)])
                            break
                        j += step
        if best is not None:
            return best[1]
    return None
