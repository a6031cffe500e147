"""--replication-factor N: every partition gets exactly N replicas, keeping what can stay."""

import math
import random
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.assign.errors import AssignError
from kafkatool.assign.factor import plan_replication_factor
from kafkatool.assign.kafka_placement import JavaRandom, assign_replicas, reassign_as_kafka
from kafkatool.assign.model import Broker
from kafkatool.assign.plan import broker_loads, replicas_moved

#: 9 brokers, 3 racks of 3
RACK = {b: f"r{b % 3}" for b in range(1, 10)}
BROKERS = [Broker(b, RACK[b]) for b in range(1, 10)]


def placed(rf: int, topics=(("a", 24), ("b", 13), ("c", 7)), brokers=BROKERS, seed=11) -> dict:
    """Topics as Kafka's rack-aware placement creates them."""
    rng = JavaRandom(seed)
    out = {}
    for topic, n in topics:
        for p, r in assign_replicas(brokers, n, rf, rng=rng).items():
            out[(topic, p)] = r
    return out


def check_properties(current, new, brokers, n):
    """The properties every --replication-factor plan has on a racked cluster."""
    ids = {b.id for b in brokers}
    racks = {b.id: b.rack for b in brokers}
    n_racks = len(set(racks.values()))
    assert set(new) == set(current)
    for tp, replicas in new.items():
        assert len(replicas) == n and len(set(replicas)) == n, (tp, replicas)
        assert set(replicas) <= ids, (tp, replicas)
        assert len({racks[b] for b in replicas}) == min(n, n_racks), (tp, replicas)
    loads = broker_loads(new, brokers)
    if n == n_racks:
        # one replica per rack: a rack holds one replica of every partition, split over its brokers
        members = {r: [b for b in ids if racks[b] == r] for r in set(racks.values())}
        ceiling = {b: math.ceil(len(current) / len(members[racks[b]])) for b in ids}
    else:
        ceiling = dict.fromkeys(ids, math.ceil(n * len(current) / len(brokers)))
    over = {b: v.replicas for b, v in loads.items() if v.replicas > ceiling[b]}
    assert not over, ({b: v.replicas for b, v in loads.items()}, ceiling)
    return loads


def test_raise_1_to_3_keeps_leaders_and_adds_only_what_is_missing():
    current = placed(1)
    new = plan_replication_factor(current, BROKERS, 3)
    loads = check_properties(current, new, BROKERS, 3)
    for tp, replicas in current.items():
        assert new[tp][0] == replicas[0]  # the leader stays the preferred leader
    assert replicas_moved(current, new) == 2 * len(current)  # exactly the added replicas
    before = broker_loads(current, BROKERS)
    assert {b: v.leaders for b, v in loads.items()} == {b: v.leaders for b, v in before.items()}
    # 44 partitions x 3 replicas over 9 brokers: 14 or 15 each
    assert sorted({v.replicas for v in loads.values()}) in ([14, 15], [15])


def test_lower_3_to_2_moves_nothing_and_keeps_racks_and_balance():
    current = placed(3)
    new = plan_replication_factor(current, BROKERS, 2)
    loads = check_properties(current, new, BROKERS, 2)
    for tp, replicas in current.items():
        assert new[tp][0] == replicas[0]
        assert set(new[tp]) < set(replicas)
        assert new[tp] == [b for b in replicas if b in new[tp]]  # the kept replicas keep their order
    assert replicas_moved(current, new) == 0
    counts = [v.replicas for v in loads.values()]
    assert max(counts) - min(counts) <= 1  # 88 replicas over 9 brokers: 9 or 10 each


def test_raise_2_to_3_on_unbalanced_leaders_and_a_leaving_broker():
    """Broker 9 leaves: its replicas move (a leader's position with it), everything else stays."""
    current = placed(2)
    targets = [b for b in BROKERS if b.id != 9]
    new = plan_replication_factor(current, targets, 3)
    check_properties(current, new, targets, 3)
    on_9 = sum(9 in r for r in current.values())
    assert on_9 > 0
    assert replicas_moved(current, new) == len(current) + on_9
    for tp, replicas in current.items():
        kept = [b for b in replicas if b != 9]
        assert set(kept) <= set(new[tp])
        if replicas[0] != 9:
            assert new[tp][0] == replicas[0]


def test_lowering_drops_replicas_off_the_target_brokers_first():
    current = {("t", 0): [4, 1, 2], ("t", 1): [1, 4, 3], ("t", 2): [4, 5, 6]}
    brokers = [Broker(b) for b in (1, 2, 3, 5, 6)]
    new = plan_replication_factor(current, brokers, 2)
    assert new[("t", 0)] == [1, 2]  # the leader leaves: a replica that holds the data leads
    assert new[("t", 1)] == [1, 3]
    assert new[("t", 2)] == [5, 6]
    assert replicas_moved(current, new) == 0


def test_lowering_keeps_the_racks_spread():
    """[1 r1, 4 r1, 2 r2]: lowering to 2 must drop 4 (same rack as the leader), whatever the load."""
    brokers = [Broker(1, "r1"), Broker(4, "r1"), Broker(2, "r2"), Broker(5, "r2")]
    current = {("t", 0): [1, 4, 2]}
    current.update({("u", p): [2, 5] for p in range(6)})  # broker 2 is the most loaded
    new = plan_replication_factor(current, brokers, 2)
    assert new[("t", 0)] == [1, 2]


def test_size_strategy_balances_bytes_with_the_same_guarantees():
    current = placed(1)
    sizes = {tp: (1 + zlib.crc32(f"{tp[0]}-{tp[1]}".encode()) % 97) * 1_000_000 for tp in current}
    new = plan_replication_factor(current, BROKERS, 3, strategy="size", sizes=sizes)
    for tp, replicas in current.items():
        assert len(new[tp]) == 3 and new[tp][0] == replicas[0]
        assert len({RACK[b] for b in new[tp]}) == 3
    assert replicas_moved(current, new) == 2 * len(current)
    loads = broker_loads(new, BROKERS, sizes)
    spread = max(v.bytes for v in loads.values()) - min(v.bytes for v in loads.values())
    assert spread <= max(sizes.values()), (spread, max(sizes.values()))


def test_already_at_the_factor_changes_nothing():
    current = placed(3)
    assert plan_replication_factor(current, BROKERS, 3) == current


@pytest.mark.parametrize(
    "n, message",
    [
        (10, "Replication factor: 10 larger than available brokers: 9."),
        (0, "Replication factor must be larger than 0."),
    ],
)
def test_kafkas_refusals(n, message):
    with pytest.raises(AssignError) as exc:
        plan_replication_factor(placed(1), BROKERS, n)
    assert str(exc.value) == message


def test_kafka_strategy_places_the_new_factor_from_scratch():
    current = placed(1)
    current[("a", 0)] = [1, 2]  # mixed factors: the new factor is every topic's
    got = reassign_as_kafka(current, BROKERS, seed=None, start_index=2, replication_factor=3)
    for topic, n in (("a", 24), ("b", 13), ("c", 7)):
        want = assign_replicas(BROKERS, n, 3, start_index=2)
        assert {p: got[(topic, p)] for p in range(n)} == want


def least_copies(current, targets, n, rack_aware=True):
    """The fewest replicas any plan giving each partition n replicas on ``targets`` (spanning
    min(n, racks) racks) must copy: it keeps at most one replica per rack of those on targets
    plus what the remaining slots allow once each new replica brings a missing rack."""
    racks = {b.id: b.rack for b in targets}
    required = min(n, len(set(racks.values()))) if rack_aware and targets[0].rack else 0
    total = 0
    for replicas in current.values():
        on = [b for b in replicas if b in racks]
        d = len({racks[b] for b in on})
        keep = min(len(on), n, n - max(0, required - min(d, n)))
        total += n - keep
    return total


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    n_brokers=st.integers(3, 8),
    n_racks=st.sampled_from([0, 2, 3]),
    leaving=st.integers(0, 2),
    seed=st.integers(0, 2**31),
    factor=st.integers(1, 5),
    strategy=st.sampled_from(["minimal", "size"]),
)
def test_properties_on_random_clusters(n_brokers, n_racks, leaving, seed, factor, strategy):
    """Random replica lists (any factor 1..4, some on brokers that leave): every partition gets
    exactly N replicas on the targets, spanning min(N, racks) racks; a leader on a target stays
    first; the plan copies no more replicas than the least any plan must."""
    rng = random.Random(seed)
    all_ids = list(range(1, n_brokers + leaving + 1))
    rack = {b: f"r{b % n_racks}" if n_racks else None for b in all_ids}
    targets = [Broker(b, rack[b]) for b in all_ids[:n_brokers]]
    factor = min(factor, n_brokers)
    current = {
        ("t", p): rng.sample(all_ids, rng.randint(1, min(4, len(all_ids)))) for p in range(rng.randint(1, 30))
    }
    sizes = {tp: rng.randint(0, 10**9) for tp in current}
    new = plan_replication_factor(current, targets, factor, strategy=strategy, sizes=sizes, other_racks=rack)
    ids = {b.id for b in targets}
    required = min(factor, len({b.rack for b in targets})) if n_racks else 0
    for tp, replicas in new.items():
        assert len(replicas) == factor and len(set(replicas)) == factor and set(replicas) <= ids
        if n_racks:
            assert len({rack[b] for b in replicas}) >= required, (tp, current[tp], replicas)
        if current[tp][0] in ids:
            assert replicas[0] == current[tp][0], (tp, current[tp], replicas)
    assert replicas_moved(current, new) == least_copies(current, targets, factor, bool(n_racks))
