"""Kafka's placement (AdminUtils) against cases worked out by hand from the rules in notes/ops.md §2."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.assign.errors import AssignError
from kafkatool.assign.kafka_placement import (
    JavaRandom,
    assign_replicas,
    draw_start_and_shift,
    rack_alternated_brokers,
)
from kafkatool.assign.model import Broker


def brokers(spec):
    """[0, 1, 2] or {0: "r1", ...} (dict order kept)."""
    if isinstance(spec, dict):
        return [Broker(b, r) for b, r in spec.items()]
    return [Broker(b) for b in spec]


# (brokers, partitions, rf, start, shift, first partition, expected)
# Each expectation was computed by hand; the working is in the comments.
CASES = [
    pytest.param(
        list(range(5)),
        6,
        3,
        0,
        None,
        0,
        # f=pid+0; followers (f+1+(shift+j)%4)%5; pid5 bumps shift to 1: [0, 0+1+1, 0+1+2]
        {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1], 5: [0, 2, 3]},
        id="unaware-5-brokers-start0",
    ),
    pytest.param(
        [3, 1, 4],
        4,
        2,
        1,
        2,
        0,
        # order kept [3,1,4]; f=(pid+1)%3; follower (f+1+(2)%2)%3=f+1; pid3 bumps shift to 3 -> (f+1+1)%3
        {0: [1, 4], 1: [4, 3], 2: [3, 1], 3: [1, 3]},
        id="unaware-given-order-start1-shift2",
    ),
    pytest.param(
        list(range(5)),
        3,
        3,
        0,
        None,
        4,
        # starts at pid 4 (no bump), pid5 bumps shift to 1, pid6: f=1 -> [1, 1+1+1, 1+1+2]
        {4: [4, 0, 1], 5: [0, 2, 3], 6: [1, 3, 4]},
        id="unaware-added-partitions",
    ),
    pytest.param(
        [5, 6, 7],
        4,
        1,
        2,
        None,
        0,
        # RF 1: only the leader, f=(pid+2)%3
        {0: [7], 1: [5], 2: [6], 3: [7]},
        id="unaware-rf1",
    ),
    pytest.param(
        list(range(4)),
        5,
        2,
        2,
        None,
        0,
        # fixed start 2 fixes shift 2: follower (f+1+2%3)%4=(f+3)%4; pid4 bumps shift to 3: (2+1+0)%4=3
        {0: [2, 1], 1: [3, 2], 2: [0, 3], 3: [1, 0], 4: [2, 3]},
        id="unaware-fixed-start-fixes-shift",
    ),
    pytest.param(
        {0: "r1", 1: "r3", 2: "r3", 3: "r2", 4: "r2", 5: "r1"},
        7,
        3,
        0,
        None,
        0,
        # A=[0,3,1,5,4,2]; pid6 bumps shift to 1 -> step uses 1*3 racks: (0+1+3%5)=4 -> 4, then 5 -> 2
        {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3], 6: [0, 4, 2]},
        id="aware-3-racks",
    ),
    pytest.param(
        {1: "a", 2: "a", 3: "b", 4: "b"},
        5,
        3,
        0,
        None,
        0,
        # A=[1,3,2,4], RF 3 > 2 racks: once both racks hold one, any broker not chosen is accepted;
        # pid4: shift 1 -> 1*2: k=0 (0+1+2%3)%4=3 -> 4, k=1 (0+1+3%3)%4=1 -> 3
        {0: [1, 3, 2], 1: [3, 2, 4], 2: [2, 4, 1], 3: [4, 1, 3], 4: [1, 4, 3]},
        id="aware-rf-above-racks",
    ),
    pytest.param(
        {0: "x", 1: "x", 2: "x", 3: "y"},
        5,
        2,
        1,
        None,
        0,
        # A=[0,3,1,2] (y exhausted after 3); shift*R=2; pid2: f=3 -> 2(x); k=0 -> A[2]=1 x rejected,
        # k=1 -> A[0]=0 x rejected, k=2 -> A[1]=3 y; pid4: shift 2 -> 4: (1+1+4%3)%4=3 -> 2
        {0: [3, 0], 1: [1, 3], 2: [2, 3], 3: [0, 3], 4: [3, 2]},
        id="aware-uneven-racks-rejections",
    ),
]


@pytest.mark.parametrize("spec, n, rf, start, shift, first, expected", CASES)
def test_hand_worked_cases(spec, n, rf, start, shift, first, expected):
    got = assign_replicas(brokers(spec), n, rf, start_index=start, shift=shift, first_partition=first)
    assert got == expected


def test_rack_alternated_list():
    assert rack_alternated_brokers(brokers({0: "r1", 1: "r3", 2: "r3", 3: "r2", 4: "r2", 5: "r1"})) == [
        0,
        3,
        1,
        5,
        4,
        2,
    ]
    # racks sort as strings ("r10" < "r2"), ids sort as numbers within a rack
    assert rack_alternated_brokers(brokers({10: "r2", 9: "r10", 2: "r2", 1: "r10", 3: "r10"})) == [
        1,
        2,
        3,
        10,
        9,
    ]


# java.util.Random(seed).nextInt(bound) as printed by a JVM (OpenJDK, java R.java).
JAVA_BOUNDS = [1, 2, 3, 5, 7, 10, 12, 16, 1000, 1 << 30, 2147483647]
JAVA_DRAWS = {
    0: [
        0,
        1,
        1,
        2,
        4,
        3,
        11,
        1,
        719,
        839166427,
        715581077,
        0,
        0,
        1,
        0,
        0,
        4,
        3,
        15,
        320,
        295229571,
        672024888,
    ],
    42: [
        0,
        0,
        0,
        4,
        5,
        5,
        5,
        11,
        519,
        98059046,
        1939977182,
        0,
        0,
        0,
        1,
        3,
        6,
        6,
        12,
        209,
        987120700,
        326327863,
    ],
    -7: [
        0,
        1,
        1,
        2,
        0,
        7,
        3,
        5,
        245,
        212737472,
        988357177,
        0,
        1,
        1,
        4,
        4,
        2,
        0,
        9,
        917,
        380950075,
        320299017,
    ],
    123456789012: [
        0,
        0,
        0,
        1,
        0,
        3,
        1,
        12,
        865,
        889977232,
        706363822,
        0,
        0,
        0,
        3,
        3,
        1,
        10,
        11,
        389,
        419592956,
        1898266512,
    ],
}


@pytest.mark.parametrize("seed", sorted(JAVA_DRAWS))
def test_java_random_matches_the_jvm(seed):
    rng = JavaRandom(seed)
    got = [rng.next_int(JAVA_BOUNDS[i % len(JAVA_BOUNDS)]) for i in range(22)]
    assert got == JAVA_DRAWS[seed]


def test_seeded_placement_draws_start_then_shift():
    # new Random(42): nextInt(5) = 0, then nextInt(5) = 3 (JVM); start 0, shift 3:
    # follower (f+1+3%4)%5 = (f+4)%5
    got = assign_replicas(brokers(range(5)), 3, 2, rng=JavaRandom(42))
    assert got == {0: [0, 4], 1: [1, 0], 2: [2, 1]}
    assert draw_start_and_shift(5, JavaRandom(42)) == (0, 3)


@pytest.mark.parametrize(
    "spec, n, rf, message",
    [
        ([0, 1], 3, 3, "Replication factor: 3 larger than available brokers: 2."),
        ([0, 1], 0, 1, "Number of partitions must be larger than 0."),
        ([0, 1], 2, 0, "Replication factor must be larger than 0."),
        ([0, 0, 1], 2, 2, "duplicate entries: 0"),
        ({0: "a", 1: None, 2: "b"}, 2, 2, "not all brokers have rack information (no rack on broker 1)"),
    ],
)
def test_invalid_inputs(spec, n, rf, message):
    with pytest.raises(AssignError) as exc:
        assign_replicas(brokers(spec), n, rf, start_index=0)
    assert message in str(exc.value)


def test_mixed_racks_allowed_when_rack_unaware():
    got = assign_replicas(brokers({0: "a", 1: None, 2: "b"}), 3, 2, start_index=0, rack_aware=False)
    assert got == assign_replicas(brokers([0, 1, 2]), 3, 2, start_index=0)


@settings(max_examples=150, deadline=None)
@given(
    n_brokers=st.integers(1, 9),
    n_racks=st.integers(1, 4),
    n_parts=st.integers(1, 40),
    data=st.data(),
)
def test_rack_aware_properties(n_brokers, n_racks, n_parts, data):
    rf = data.draw(st.integers(1, n_brokers))
    start = data.draw(st.integers(0, 3 * n_brokers))
    first = data.draw(st.integers(0, 30))
    spec = {b: f"r{b % n_racks}" for b in range(n_brokers)}
    racks_present = len(set(spec.values()))
    got = assign_replicas(brokers(spec), n_parts, rf, start_index=start, first_partition=first)
    assert sorted(got) == list(range(first, first + n_parts))
    for replicas in got.values():
        assert len(replicas) == rf == len(set(replicas))
        assert len({spec[b] for b in replicas}) == min(rf, racks_present)
    # leaders go round the alternated list
    order = rack_alternated_brokers(brokers(spec))
    assert [got[p][0] for p in sorted(got)] == [order[(p + start) % n_brokers] for p in sorted(got)]
