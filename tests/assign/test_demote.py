"""--demote-brokers: preferred leadership off brokers, no replica set changed."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.assign.demote import plan_demotion
from kafkatool.assign.kafka_placement import JavaRandom, assign_replicas
from kafkatool.assign.model import Broker
from kafkatool.assign.plan import broker_loads, replicas_moved


def cluster() -> dict:
    brokers = [Broker(b, f"r{b % 3}") for b in range(6)]
    rng = JavaRandom(3)
    out = {}
    for topic, n in (("a", 30), ("b", 12)):
        for p, r in assign_replicas(brokers, n, 3, rng=rng).items():
            out[(topic, p)] = r
    return out


def test_demotion_puts_the_demoted_brokers_last_everywhere_and_balances_the_new_leaders():
    current = cluster()
    result = plan_demotion(current, {0, 1})
    assert not result.left
    after = dict(current) | result.proposed
    holding = [tp for tp, r in current.items() if {0, 1} & set(r)]
    # every partition that does not already list 0 and 1 last (in their order) is in the plan
    out_of_place = [
        tp
        for tp, r in current.items()
        if r != [b for b in r if b not in (0, 1)] + [b for b in r if b in (0, 1)]
    ]
    assert sorted(result.proposed) == sorted(out_of_place)
    led = [tp for tp, r in current.items() if r[0] in (0, 1)]
    assert set(led) < set(out_of_place) < set(holding)  # followers reordered too, not only leaders
    for tp in holding:
        old, new = current[tp], after[tp]
        assert sorted(new) == sorted(old)  # no replica set changes
        assert new[0] not in (0, 1)
        if old[0] not in (0, 1):
            assert new[0] == old[0]  # a preferred leader that is not demoted stays
        demoted_tail = [b for b in old if b in (0, 1)]
        assert new[len(new) - len(demoted_tail) :] == demoted_tail  # demoted last, in their order
    assert replicas_moved(current, after) == 0
    leaders = {b: v.leaders for b, v in broker_loads(after).items()}
    assert leaders[0] == leaders[1] == 0
    # 42 partitions led by the four other brokers: 10 or 11 each
    assert sorted({leaders[b] for b in (2, 3, 4, 5)}) == [10, 11]
    # leaders unknown: each partition is assumed led by its first replica, so the election is due
    # where the first replica changes
    assert result.elect == sorted(led)


def test_a_demoted_follower_moves_last_whatever_the_isr():
    """The preferred leader stays, so neither the ISR nor the live brokers matter."""
    current = {
        ("t", 0): [2, 1, 3],  # 1 is out of sync: moved all the same
        ("t", 1): [2, 3, 1],  # already last: untouched
        ("t", 2): [3, 1, 2, 4],
        ("t", 3): [4, 1, 3],  # no ISR known: the order still changes, the leader does not
    }
    isr = {("t", 0): [2, 3], ("t", 1): [2, 3, 1], ("t", 2): [3, 4]}
    result = plan_demotion(current, {1}, isr, live={2, 3, 4})
    assert result.proposed == {("t", 0): [2, 3, 1], ("t", 2): [3, 2, 4, 1], ("t", 3): [4, 3, 1]}
    assert not result.left and result.elect == []  # no preferred leader changes
    # two demoted followers: behind the others, in their old order
    result = plan_demotion({("t", 2): [3, 1, 2, 4]}, {1, 2}, isr)
    assert result.proposed == {("t", 2): [3, 4, 1, 2]} and result.elect == []


def test_a_demoted_preferred_leader_out_of_the_isr_still_hands_over_to_an_in_sync_one():
    current = {("t", 0): [1, 2, 3], ("t", 1): [1, 2, 3]}
    isr = {("t", 0): [2, 3], ("t", 1): [3]}
    result = plan_demotion(current, {1}, isr)
    assert result.proposed == {("t", 0): [2, 3, 1], ("t", 1): [3, 2, 1]}
    assert result.elect == [("t", 0), ("t", 1)]


def test_the_election_covers_what_a_demoted_broker_leads_now():
    """After a failover a demoted broker may lead a partition it is not the first replica of:
    the election moves it back to the (not demoted) first replica, reordered or not."""
    current = {
        ("t", 0): [2, 1],  # led by 1 now, order already right: elected, not in the plan
        ("t", 1): [2, 1, 3],  # led by 1 now: reordered and elected
        ("t", 2): [2, 1, 3],  # led by 2: reordered, no election needed
        ("t", 3): [1, 2],  # first replica changes: elected
        ("t", 4): [1],  # every replica demoted: left, not elected
        ("t", 5): [3, 2],  # holds no demoted broker
        ("t", 6): [3, 2, 1],  # leader unknown (no state): assumed its first replica
    }
    leaders = {("t", 0): 1, ("t", 1): 1, ("t", 2): 2, ("t", 3): 1, ("t", 4): 1, ("t", 5): 3, ("t", 6): None}
    result = plan_demotion(current, {1}, leaders=leaders)
    assert result.proposed == {("t", 1): [2, 3, 1], ("t", 2): [2, 3, 1], ("t", 3): [2, 1]}
    assert result.elect == [("t", 0), ("t", 1), ("t", 3)]
    assert [x.tp for x in result.left] == [("t", 4)]


def test_the_new_leader_must_be_in_sync_and_unfixable_partitions_are_left():
    current = {
        ("t", 0): [1, 2, 3],  # 2 is out of sync: 3 leads
        ("t", 1): [1, 2],  # the only other replica is out of sync: left
        ("t", 2): [1],  # every replica demoted: left
        ("t", 3): [2, 1],  # not led by a demoted broker, 1 already last: untouched
        ("t", 4): [1, 4],  # no ISR known: left
    }
    isr = {("t", 0): [1, 3], ("t", 1): [1], ("t", 2): [1], ("t", 3): [2, 1]}
    result = plan_demotion(current, {1}, isr)
    assert result.proposed == {("t", 0): [3, 2, 1]}
    left = {x.tp: x.reason for x in result.left}
    assert left == {
        ("t", 1): "no replica outside the demoted brokers is in sync (ISR [1])",
        ("t", 2): "every replica is on a demoted broker",
        ("t", 4): "its ISR is unknown (no partition state)",
    }
    # every replica demoted: left, whatever the ISR says or whether it is known
    result = plan_demotion({("t", 1): [1, 2], ("t", 4): [1, 2]}, {1, 2}, isr)
    assert result.proposed == {} and result.elect == []
    assert {x.reason for x in result.left} == {"every replica is on a demoted broker"}


def test_without_isr_every_replica_counts_as_in_sync():
    current = {("t", 0): [1, 2, 3], ("t", 1): [1, 3, 2], ("u", 0): [2, 3]}
    result = plan_demotion(current, {1})
    # u-0 makes 2 a leader already: t-0 and t-1 both go to 3 (fewest preferred leaders first)
    assert result.proposed == {("t", 0): [3, 2, 1], ("t", 1): [3, 2, 1]}
    assert not result.left


def test_excluding_follower_demotion_moves_only_the_demoted_preferred_leaders():
    """Cruise Control's default (exclude_follower_demotion=true): a demoted broker that is only a
    follower keeps its place; a demoted preferred leader goes last, the new one (in sync,
    balanced) first, every other replica where it was, demoted followers included."""
    current = {
        ("t", 0): [2, 1, 3],  # 1 a follower: untouched
        ("t", 1): [1, 2, 3],  # 1 the preferred leader: last
        ("t", 2): [1, 3, 4, 2],  # 2 out of sync: 4 leads (3 already leads t5), 3 and 2 in order
        ("t", 3): [1, 5, 2, 4],  # 4 leads (2 leads t0, t1); 5 (demoted) keeps second place
        ("t", 4): [1, 5],  # every replica demoted: left
        ("t", 5): [3, 2],  # led by 5 now (after a failover): elected, not reordered
    }
    isr = {("t", 0): [2, 1, 3], ("t", 1): [1, 2, 3], ("t", 2): [1, 3, 4], ("t", 3): [1, 5, 2, 4]}
    isr |= {("t", 4): [1, 5], ("t", 5): [3, 2]}
    leaders = {("t", 5): 5} | {tp: r[0] for tp, r in current.items() if tp != ("t", 5)}
    current[("t", 5)] = [3, 2, 5]
    isr[("t", 5)] = [3, 2, 5]
    result = plan_demotion(current, {1, 5}, isr, leaders=leaders, followers=False)
    assert result.proposed == {("t", 1): [2, 3, 1], ("t", 2): [4, 3, 2, 1], ("t", 3): [4, 5, 2, 1]}
    assert [x.tp for x in result.left] == [("t", 4)]
    assert result.elect == [("t", 1), ("t", 2), ("t", 3), ("t", 5)]
    # by default the same demotion also puts the demoted followers last
    full = plan_demotion(current, {1, 5}, isr, leaders=leaders).proposed
    assert full[("t", 0)] == [2, 3, 1] and full[("t", 3)] == [4, 2, 1, 5] and ("t", 5) not in full


def test_the_new_leader_must_be_alive_when_the_live_brokers_are_known():
    current = {("t", 0): [1, 2, 3], ("t", 1): [1, 2]}
    result = plan_demotion(current, {1}, {("t", 0): [1, 2, 3], ("t", 1): [1, 2]}, live={1, 3})
    assert result.proposed == {("t", 0): [3, 2, 1]}
    assert [(x.tp, x.reason) for x in result.left] == [
        (("t", 1), "no in-sync replica outside the demoted brokers is alive (candidates [2])")
    ]


@settings(max_examples=120, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), n_brokers=st.integers(2, 7), n_demoted=st.integers(1, 3))
def test_properties_on_random_partitions(seed, n_brokers, n_demoted):
    """Random replica lists, ISRs (some unknown) and live brokers: no replica set changes; a
    partition is left only when every replica is demoted or its demoted preferred leader has
    no live in-sync replica elsewhere (or no known ISR); every other partition holding a demoted
    broker lists them last in their old order, keeps a preferred leader that is not demoted,
    and hands a demoted one's place to a live in-sync replica. So neither a preferred election
    nor a failover election (the first live in-sync replica in order) picks a demoted broker
    while another replica can lead."""
    rng = random.Random(seed)
    ids = list(range(1, n_brokers + 1))
    demoted = set(rng.sample(ids, min(n_demoted, n_brokers)))
    current = {
        ("t", p): rng.sample(ids, rng.randint(1, min(4, n_brokers))) for p in range(rng.randint(1, 30))
    }
    isr = {
        tp: [b for b in r if rng.random() < 0.75] or r[:1] for tp, r in current.items() if rng.random() < 0.9
    }
    live = {b for b in ids if rng.random() < 0.9}
    result = plan_demotion(current, demoted, isr, live)
    # excluding follower demotion: the same partitions left, the same new preferred leaders,
    # and only the partitions whose preferred leader is demoted change, the demoted one last
    # and every other replica in its old order
    lean = plan_demotion(current, demoted, isr, live, followers=False)
    assert [x.tp for x in lean.left] == [x.tp for x in result.left]
    assert lean.elect == result.elect
    for tp, new in lean.proposed.items():
        old = current[tp]
        assert old[0] in demoted and new[0] == result.proposed[tp][0]
        assert new == [new[0]] + [b for b in old if b not in (new[0], old[0])] + [old[0]]
    assert set(lean.proposed) == {tp for tp in result.proposed if current[tp][0] in demoted}
    left = {x.tp: x for x in result.left}
    assert len(left) == len(result.left)
    for tp, old in current.items():
        new = result.proposed.get(tp, old)
        assert sorted(new) == sorted(old)
        held = [b for b in old if b in demoted]
        others = [b for b in old if b not in demoted]
        if tp in left:
            assert tp not in result.proposed and tp not in result.elect
            if others:
                assert old[0] in demoted
                assert tp not in isr or not [b for b in others if b in isr[tp] and b in live]
            continue
        if not held:
            assert tp not in result.proposed
            continue
        assert new[len(others) :] == held and new[0] not in demoted
        if old[0] not in demoted:
            assert new[0] == old[0]
        else:
            assert new[0] in isr[tp] and new[0] in live and tp in result.elect
        if tp in isr:
            electable = [b for b in new if b in isr[tp] and b in live]
            if any(b not in demoted for b in electable):
                assert electable[0] not in demoted
