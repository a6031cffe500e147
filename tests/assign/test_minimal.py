"""--strategy minimal: balanced replica and leader counts with as few moves as possible."""

import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.assign.kafka_placement import JavaRandom, assign_replicas
from kafkatool.assign.minimal import plan_minimal
from kafkatool.assign.model import Broker
from kafkatool.assign.plan import broker_loads, replicas_moved, report

RACKS = {b: f"r{b % 3}" for b in range(12)}
BROKERS_12 = [Broker(b, RACKS[b]) for b in range(12)]


def skewed_cluster():
    """500 partitions, RF 3: four topics placed by Kafka on the 9 old brokers (3 per rack), one
    topic piled on brokers 0,1,2; brokers 9, 10, 11 (one per rack) are new and empty."""
    old = [Broker(b, RACKS[b]) for b in range(9)]
    rng = JavaRandom(2024)
    current = {}
    for t in range(4):
        for p, r in assign_replicas(old, 100, 3, rng=rng).items():
            current[(f"t{t}", p)] = r
    for p in range(100):
        current[("hot", p)] = [[0, 1, 2], [1, 2, 0], [2, 0, 1]][p % 3]
    return current


def kafka_generate(current, brokers, *, seed=None, start_index=None):
    """What kafka-reassign-partitions --generate proposes (per topic, in name order)."""
    rng = JavaRandom(seed) if seed is not None else None
    topics = sorted({t for t, _ in current})
    proposed = {}
    for topic in topics:
        n = sum(1 for t, _ in current if t == topic)
        for p, r in assign_replicas(brokers, n, 3, rng=rng, start_index=start_index).items():
            proposed[(topic, p)] = r
    return proposed


def best_generate_per_topic(current, brokers):
    """Generate-and-diff at its best: for each topic the fixed start index that moves least."""
    best = {}
    for topic in sorted({t for t, _ in current}):
        part = {tp: r for tp, r in current.items() if tp[0] == topic}
        options = []
        for s in range(len(brokers)):
            placed = {(topic, p): r for p, r in assign_replicas(brokers, len(part), 3, start_index=s).items()}
            options.append((replicas_moved(part, placed), s, placed))
        best.update(min(options, key=lambda o: (o[0], o[1]))[2])
    return best


def spreads(assignment, brokers):
    loads = broker_loads(assignment, brokers)
    counts = [loads[b.id].replicas for b in brokers]
    leaders = [loads[b.id].leaders for b in brokers]
    return max(counts) - min(counts), max(leaders) - min(leaders)


def test_minimal_moves_no_more_than_generate_and_diff():
    current = skewed_cluster()
    assert len(current) == 500
    minimal = plan_minimal(current, BROKERS_12)
    generated = kafka_generate(current, BROKERS_12, seed=7)
    best = best_generate_per_topic(current, BROKERS_12)

    moved_minimal = replicas_moved(current, minimal)
    moved_generate = replicas_moved(current, generated)
    moved_best = replicas_moved(current, best)
    # The least any plan can move to give each broker its 125 replicas.
    lower_bound = sum(max(0, c.replicas - 125) for c in broker_loads(current, BROKERS_12).values())
    print(
        f"\nskewed 12 brokers / 3 racks / 500 partitions: minimal moves {moved_minimal} replicas "
        f"(lower bound {lower_bound}); generate-and-diff moves {moved_generate} (seed 7), "
        f"{moved_best} with the best start index per topic"
    )
    assert moved_minimal == lower_bound
    assert moved_minimal <= moved_best <= moved_generate
    # ... for a balance at least as good as Kafka's placement gives.
    rep_spread, lead_spread = spreads(minimal, BROKERS_12)
    for other in (generated, best):
        other_rep, other_lead = spreads(other, BROKERS_12)
        assert rep_spread <= other_rep
        assert lead_spread <= other_lead
    assert (rep_spread, lead_spread) == (0, 1)
    # rack rule: every partition on 3 racks, every rack with a third of the replicas
    for replicas in minimal.values():
        assert len({RACKS[b] for b in replicas}) == 3
    rep = report(current, minimal, BROKERS_12)
    assert [r["replicas_after"] for r in rep.per_rack] == [500, 500, 500]


def test_balanced_cluster_is_left_alone():
    current = {("t", p): r for p, r in assign_replicas(BROKERS_12, 480, 3, start_index=0).items()}
    assert plan_minimal(current, BROKERS_12) == current


def test_decommission_moves_only_the_leaving_brokers_replicas():
    current = {("t", p): r for p, r in assign_replicas(BROKERS_12, 120, 3, start_index=0).items()}
    keep = [b for b in BROKERS_12 if b.id != 11]
    new = plan_minimal(current, keep)
    leaving = sum(11 in r for r in current.values())
    assert all(11 not in r for r in new.values())
    # 30 replicas leave broker 11; spreading 360 replicas over 11 brokers needs no other move
    assert replicas_moved(current, new) == leaving == 30
    for replicas in new.values():
        assert len({RACKS[b] for b in replicas}) == 3


def test_rack_violations_are_repaired():
    brokers = [Broker(0, "a"), Broker(1, "a"), Broker(2, "b"), Broker(3, "b")]
    current = {("t", 0): [0, 1], ("t", 1): [2, 3], ("t", 2): [0, 2], ("t", 3): [3, 1]}
    new = plan_minimal(current, brokers)
    racks = {b.id: b.rack for b in brokers}
    for replicas in new.values():
        assert {racks[b] for b in replicas} == {"a", "b"}
    assert replicas_moved(current, new) == 2
    assert [row.replicas for row in broker_loads(new, brokers).values()] == [2, 2, 2, 2]


def test_rack_unaware_ignores_racks():
    brokers = [Broker(0, "a"), Broker(1, "a"), Broker(2, "b"), Broker(3, "b")]
    current = {("t", 0): [0, 1], ("t", 1): [2, 3]}
    assert plan_minimal(current, brokers, rack_aware=False) == current


@settings(max_examples=80, deadline=None)
@given(
    n_brokers=st.integers(2, 10),
    n_parts=st.integers(1, 60),
    seed=st.integers(0, 10_000),
    racks=st.booleans(),
)
def test_random_clusters(n_brokers, n_parts, seed, racks):
    rnd = random.Random(seed)
    n_racks = 3 if racks else 1
    brokers = [Broker(b, f"r{b % n_racks}" if racks else None) for b in range(n_brokers)]
    pool = list(range(n_brokers + 2))  # two brokers that are not targets
    current = {}
    for p in range(n_parts):
        rf = rnd.randint(1, min(3, n_brokers))
        current[("t", p)] = rnd.sample(pool, rf)
    new = plan_minimal(current, brokers)
    target_ids = {b.id for b in brokers}
    rack = {b.id: b.rack for b in brokers}
    for tp, replicas in new.items():
        assert len(replicas) == len(current[tp]) == len(set(replicas))
        assert set(replicas) <= target_ids
        if racks:
            assert len({rack[b] for b in replicas}) == min(len(replicas), len(set(rack.values())))
    loads = broker_loads(new, brokers)
    counts = [loads[b.id].replicas for b in brokers]
    if not racks:
        assert max(counts) - min(counts) <= 1


def brute_force_min_moves(current, targets):
    """The fewest replica moves giving every target broker floor/ceil of the replicas."""
    sets_per_part = []
    for replicas in current.values():
        sets_per_part.append(
            [
                (frozenset(c), len(set(c) - set(replicas)))
                for c in itertools.combinations(targets, len(replicas))
            ]
        )
    total = sum(len(r) for r in current.values())
    lo, hi = total // len(targets), -(-total // len(targets))
    best = None
    for choice in itertools.product(*sets_per_part):
        cost = sum(c for _, c in choice)
        if best is not None and cost >= best:
            continue
        counts = dict.fromkeys(targets, 0)
        for s, _ in choice:
            for b in s:
                counts[b] += 1
        if all(lo <= c <= hi for c in counts.values()):
            best = cost
    return best


@settings(max_examples=300, deadline=None)
@given(
    n_brokers=st.integers(2, 4),
    n_parts=st.integers(1, 5),
    seed=st.integers(0, 10_000),
    leaving=st.integers(0, 2),
)
def test_moves_match_brute_force_optimum(n_brokers, n_parts, seed, leaving):
    rnd = random.Random(seed)
    brokers = [Broker(b) for b in range(n_brokers)]
    pool = list(range(n_brokers + leaving))  # brokers >= n_brokers are being removed
    current = {("t", p): rnd.sample(pool, rnd.randint(1, min(2, n_brokers))) for p in range(n_parts)}
    new = plan_minimal(current, brokers)
    assert replicas_moved(current, new) == brute_force_min_moves(current, list(range(n_brokers)))


def test_leaders_balanced_by_reordering_only():
    brokers = [Broker(b) for b in range(4)]
    current = {("t", p): [0, 1 + p % 3] for p in range(8)}  # broker 0 leads everything
    current.update({("u", p): [1 + p % 3, 0] for p in range(4)})
    new = plan_minimal(current, brokers)
    loads = broker_loads(new, brokers)
    assert [loads[b].leaders for b in range(4)] == [3, 3, 3, 3]
    rep = report(current, new, brokers)
    # replica counts 12,5,4,3 -> 6 each: broker 0 sheds 6, nothing else moves
    assert rep.replicas_moved == 6
    assert [loads[b].replicas for b in range(4)] == [6, 6, 6, 6]


def brute_force_best_spread(current, brokers):
    """The smallest per-broker replica spread any rack-respecting placement reaches."""
    rack = {b.id: b.rack for b in brokers}
    n_racks = len(set(rack.values()))
    options = [
        [c for c in itertools.combinations(rack, len(r)) if len({rack[b] for b in c}) == min(len(r), n_racks)]
        for r in current.values()
    ]
    best = None
    for choice in itertools.product(*options):
        counts = dict.fromkeys(rack, 0)
        for c in choice:
            for b in c:
                counts[b] += 1
        spread = max(counts.values()) - min(counts.values())
        best = spread if best is None else min(best, spread)
    return best


@settings(max_examples=150, deadline=None)
@given(
    n_brokers=st.integers(3, 5),
    n_parts=st.integers(1, 4),
    seed=st.integers(0, 10_000),
    leaving=st.integers(0, 1),
)
def test_rack_aware_spread_matches_brute_force(n_brokers, n_parts, seed, leaving):
    rnd = random.Random(seed)
    brokers = [Broker(b, f"r{b % 2}") for b in range(n_brokers)]
    pool = list(range(n_brokers + leaving))
    current = {("t", p): rnd.sample(pool, rnd.randint(1, 2)) for p in range(n_parts)}
    new = plan_minimal(current, brokers)
    loads = broker_loads(new, brokers)
    counts = [loads[b.id].replicas for b in brokers]
    assert max(counts) - min(counts) == brute_force_best_spread(current, brokers)
    for replicas in new.values():
        assert len({b % 2 for b in replicas}) == len(replicas)  # RF <= 2 racks: one replica per rack
