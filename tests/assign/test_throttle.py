"""Throttle lists and rates as kafka-reassign-partitions computes them (notes/ops.md §1.6)."""

from kafkatool.assign.throttle import (
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
    LOG_DIRS_THROTTLE,
    InFlight,
    clear_targets,
    compute_throttles,
)


def test_lists_sorted_as_strings_and_unchanged_partitions_throttled_as_sources():
    current = {("a", 2): [1, 2], ("a", 10): [3, 4], ("a", 0): [1, 2]}
    proposed = {("a", 2): [2, 5], ("a", 10): [3, 5], ("a", 0): [1, 2]}  # a-0 does not move
    s = compute_throttles(proposed, current, rate=1000)
    assert s.topics == {
        "a": {
            # a TreeSet<String>: "10:3" sorts before "2:1"
            LEADER_THROTTLED_REPLICAS: "0:1,0:2,10:3,10:4,2:1,2:2",
            FOLLOWER_THROTTLED_REPLICAS: "10:5,2:5",
        }
    }
    assert s.brokers == {
        b: {LEADER_THROTTLED_RATE: "1000", FOLLOWER_THROTTLED_RATE: "1000"} for b in (1, 2, 3, 4, 5)
    }


def test_in_flight_reassignments_join_the_move_map():
    # b-0 is reassigning [1,2] -> [2,3]: RS [2,3,1], adding [3]; sources are RS minus adding
    in_flight = {("b", 0): InFlight([2, 3, 1], adding=[3], removing=[1])}
    s = compute_throttles({("a", 0): [4]}, {("a", 0): [1]}, rate=5, in_flight=in_flight)
    assert s.topics["b"] == {LEADER_THROTTLED_REPLICAS: "0:1,0:2", FOLLOWER_THROTTLED_REPLICAS: "0:3"}
    assert s.topics["a"] == {LEADER_THROTTLED_REPLICAS: "0:1", FOLLOWER_THROTTLED_REPLICAS: "0:4"}
    assert sorted(s.brokers) == [1, 2, 3, 4]
    # resubmitting an in-flight partition keeps the in-flight sources
    s = compute_throttles({("b", 0): [2, 3]}, {("b", 0): [2, 3, 1]}, rate=5, in_flight=in_flight)
    assert s.topics["b"] == {LEADER_THROTTLED_REPLICAS: "0:1,0:2", FOLLOWER_THROTTLED_REPLICAS: "0:3"}


def test_no_rate_no_throttle_and_log_dir_rate():
    assert compute_throttles({("a", 0): [2]}, {("a", 0): [1]}, rate=None).to_dict() == {
        "topics": {},
        "brokers": {},
    }
    s = compute_throttles({("a", 0): [2]}, {("a", 0): [1]}, rate=None, log_dir_rate=7, log_dir_brokers=[2])
    assert s.brokers == {2: {LOG_DIRS_THROTTLE: "7"}}


def test_clear_targets_are_live_brokers_plus_file_brokers():
    brokers, topics = clear_targets([1, 2], {("a", 0): [2, 9], ("b", 1): [3]})
    assert brokers == [1, 2, 3, 9]
    assert topics == ["a", "b"]
