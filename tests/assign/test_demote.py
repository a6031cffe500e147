"""--demote-brokers: preferred leadership off brokers, no replica set changed."""

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


def test_demotion_reorders_only_and_balances_the_new_leaders():
    current = cluster()
    result = plan_demotion(current, {0, 1})
    assert not result.left
    led = [tp for tp, r in current.items() if r[0] in (0, 1)]
    assert sorted(result.proposed) == sorted(led)  # exactly the partitions a demoted broker led
    for tp, new in result.proposed.items():
        old = current[tp]
        assert sorted(new) == sorted(old)  # no replica set changes
        assert new[0] not in (0, 1)
        demoted_tail = [b for b in old if b in (0, 1)]
        assert new[len(new) - len(demoted_tail) :] == demoted_tail  # demoted last, in their order
    after = dict(current) | result.proposed
    assert replicas_moved(current, after) == 0
    leaders = {b: v.leaders for b, v in broker_loads(after).items()}
    assert leaders[0] == leaders[1] == 0
    # 42 partitions led by the four other brokers: 10 or 11 each
    assert sorted({leaders[b] for b in (2, 3, 4, 5)}) == [10, 11]


def test_the_new_leader_must_be_in_sync_and_unfixable_partitions_are_left():
    current = {
        ("t", 0): [1, 2, 3],  # 2 is out of sync: 3 leads
        ("t", 1): [1, 2],  # the only other replica is out of sync: left
        ("t", 2): [1],  # every replica demoted: left
        ("t", 3): [2, 1],  # not led by a demoted broker: untouched
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


def test_without_isr_every_replica_counts_as_in_sync():
    current = {("t", 0): [1, 2, 3], ("t", 1): [1, 3, 2], ("u", 0): [2, 3]}
    result = plan_demotion(current, {1})
    # u-0 makes 2 a leader already: t-0 and t-1 both go to 3 (fewest preferred leaders first)
    assert result.proposed == {("t", 0): [3, 2, 1], ("t", 1): [3, 2, 1]}
    assert not result.left


def test_the_new_leader_must_be_alive_when_the_live_brokers_are_known():
    current = {("t", 0): [1, 2, 3], ("t", 1): [1, 2]}
    result = plan_demotion(current, {1}, {("t", 0): [1, 2, 3], ("t", 1): [1, 2]}, live={1, 3})
    assert result.proposed == {("t", 0): [3, 2, 1]}
    assert [(x.tp, x.reason) for x in result.left] == [
        (("t", 1), "no in-sync replica outside the demoted brokers is alive (candidates [2])")
    ]
