"""--replication-factor N --strategy size: the added replicas placed largest first, then the
bytes evened out by free moves (an added replica moves on; nothing more is copied)."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.assign.by_size import DEFAULT_TOLERANCE
from kafkatool.assign.factor import plan_replication_factor
from kafkatool.assign.model import Broker
from kafkatool.assign.plan import broker_loads, replicas_moved


def byte_loads(new, brokers, sizes) -> dict[int, int]:
    return {b: v.bytes for b, v in broker_loads(new, brokers, sizes).items()}


def test_the_pass_fills_the_broker_largest_first_leaves_empty():
    """t-1 (90, on rack r0) is placed first, on broker 2 (empty, lowest id); t-0 (80, on r1) may
    not go to broker 4 (r1 too) and goes to 2 as well: largest first alone leaves 2 with 170 and 4
    empty (spread 170). Moving t-1's added replica on to 4 (r1: still two racks) ends it at 10."""
    brokers = [Broker(1, "r1"), Broker(2, "r2"), Broker(3, "r0"), Broker(4, "r1")]
    racks = {b.id: b.rack for b in brokers}
    current = {("t", 0): [1], ("t", 1): [3]}
    sizes = {("t", 0): 80, ("t", 1): 90}
    new = plan_replication_factor(current, brokers, 2, strategy="size", sizes=sizes)
    assert new == {("t", 0): [1, 2], ("t", 1): [3, 4]}
    assert byte_loads(new, brokers, sizes) == {1: 80, 2: 80, 3: 90, 4: 90}
    for tp, replicas in new.items():
        assert replicas[0] == current[tp][0]  # the preferred leader stays
        assert len(set(replicas)) == 2 and len({racks[b] for b in replicas}) == 2
    assert replicas_moved(current, new) == 2  # the added replicas, nothing else


def test_the_pass_undoes_a_greedy_choice_a_later_partition_pays_for():
    """No racks. t-0 (80) goes to broker 1 (40, the lightest), then t-2 (60), which broker 3
    already holds, must go to 1 or 2 (both 120): largest first alone ends 180/120/60 (spread
    120). t-0's added replica moving on to broker 3 ends 100/120/140 (spread 40, the best any
    placement of the two added replicas reaches)."""
    brokers = [Broker(b) for b in (1, 2, 3)]
    current = {("t", 0): [2], ("t", 1): [2, 1], ("t", 2): [3]}
    sizes = {("t", 0): 80, ("t", 1): 40, ("t", 2): 60}
    new = plan_replication_factor(current, brokers, 2, strategy="size", sizes=sizes)
    assert new == {("t", 0): [2, 3], ("t", 1): [2, 1], ("t", 2): [3, 1]}
    loads = byte_loads(new, brokers, sizes)
    assert loads == {1: 100, 2: 120, 3: 140}
    assert replicas_moved(current, new) == 2


def test_lowering_keeps_a_dropped_broker_instead_of_a_heavy_one():
    """Lowering 3 -> 2 drops from the most loaded follower, largest partition first: t-1 (100)
    drops 4 (tied with 2 at 190), then t-0 (90) drops 4 too (tied with 1 at 90), which leaves
    broker 4 empty and 2 at 190 (spread 190). t-1 keeping 4 instead of 2 (both hold its data:
    nothing copied) ends it at 10."""
    brokers = [Broker(b) for b in (1, 2, 3, 4)]
    current = {("t", 0): [2, 1, 4], ("t", 1): [3, 2, 4]}
    sizes = {("t", 0): 90, ("t", 1): 100}
    new = plan_replication_factor(current, brokers, 2, strategy="size", sizes=sizes)
    assert new == {("t", 0): [2, 1], ("t", 1): [3, 4]}
    assert byte_loads(new, brokers, sizes) == {1: 90, 2: 90, 3: 100, 4: 100}
    assert replicas_moved(current, new) == 0


def test_a_balanced_raise_moves_nothing_beyond_the_added_replicas():
    brokers = [Broker(b) for b in (1, 2, 3, 4)]
    current = {("t", p): [p + 1] for p in range(4)}
    sizes = dict.fromkeys(current, 10)
    new = plan_replication_factor(current, brokers, 2, strategy="size", sizes=sizes)
    # largest first (all equal: ties by preferred leaders, then id) is already balanced
    assert new == {("t", 0): [1, 2], ("t", 1): [2, 1], ("t", 2): [3, 4], ("t", 3): [4, 3]}
    assert set(byte_loads(new, brokers, sizes).values()) == {20}
    assert replicas_moved(current, new) == 4


def test_at_the_factor_already_nothing_moves_however_uneven_the_bytes():
    """The factor change copies no replica it does not add: balancing data that stays is
    --strategy size without --replication-factor."""
    brokers = [Broker(b, f"r{b % 2}") for b in (1, 2, 3, 4)]
    current = {("t", 0): [1, 2], ("t", 1): [1, 4], ("t", 2): [3, 2], ("t", 3): [3, 4]}
    sizes = {("t", 0): 1000, ("t", 1): 900, ("t", 2): 5, ("t", 3): 1}
    assert plan_replication_factor(current, brokers, 2, strategy="size", sizes=sizes) == current


def free_moves_that_help(current, new, brokers, sizes, factor):
    """Every move the plan could still make for free that narrows a pair of brokers' gap:
    a follower (never the preferred leader) whose move copies nothing the plan does not copy
    (it was added, or goes back to a broker that held the partition), keeping the racks."""
    racks = {b.id: b.rack for b in brokers}
    n_racks = len({r for r in racks.values() if r is not None})
    loads = byte_loads(new, brokers, sizes)
    found = []
    for tp, replicas in new.items():
        size = sizes.get(tp, 0)
        for src in replicas[1:]:
            for dst in racks:
                if dst in replicas:
                    continue
                if (dst not in current[tp]) - (src not in current[tp]) > 0:
                    continue
                after = [dst if b == src else b for b in replicas]
                if n_racks and len({racks[b] for b in after}) < min(factor, n_racks):
                    continue
                if 0 < size < loads[src] - loads[dst]:
                    found.append((tp, src, dst))
    return found


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    n_brokers=st.integers(3, 7),
    n_racks=st.sampled_from([0, 2, 3]),
    seed=st.integers(0, 2**31),
    factor=st.integers(1, 4),
)
def test_size_plans_end_where_no_free_move_helps(n_brokers, n_racks, seed, factor):
    """Random clusters: the plan copies only what the factor change needs, keeps the preferred
    leaders and the racks, and ends within the tolerance or with no free move left that would
    narrow any broker pair's byte gap."""
    rng = random.Random(seed)
    ids = list(range(1, n_brokers + 1))
    brokers = [Broker(b, f"r{b % n_racks}" if n_racks else None) for b in ids]
    racks = {b.id: b.rack for b in brokers}
    factor = min(factor, n_brokers)
    current = {
        ("t", p): rng.sample(ids, rng.randint(1, min(4, n_brokers))) for p in range(rng.randint(1, 25))
    }
    if n_racks:  # a start that keeps the rack rule, so every move the plan makes is its own choice
        required = {tp: min(len(r), n_racks) for tp, r in current.items()}
        current = {tp: r for tp, r in current.items() if len({racks[b] for b in r}) >= required[tp]}
        if not current:
            return
    sizes = {tp: rng.randint(1, 10**6) for tp in current}
    new = plan_replication_factor(current, brokers, factor, strategy="size", sizes=sizes)
    added = sum(max(0, factor - len(r)) for r in current.values())
    assert replicas_moved(current, new) == added
    for tp, replicas in new.items():
        assert len(replicas) == factor == len(set(replicas))
        assert replicas[0] == current[tp][0]
        if n_racks:
            assert len({racks[b] for b in replicas}) >= min(factor, n_racks)
    loads = byte_loads(new, brokers, sizes)
    mean = sum(loads.values()) / len(loads)
    if max(loads.values()) - min(loads.values()) > DEFAULT_TOLERANCE * mean:
        assert not free_moves_that_help(current, new, brokers, sizes, factor)
