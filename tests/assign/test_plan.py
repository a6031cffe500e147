"""Plan reports: replicas, bytes and leaders moved; balance per broker and rack."""

from kafkatool.assign.model import Broker, parse_broker_list
from kafkatool.assign.plan import report


def test_report_counts():
    brokers = [Broker(1, "a"), Broker(2, "b"), Broker(3, "a")]
    current = {("t", 0): [1, 2], ("t", 1): [2, 1], ("t", 2): [4, 1]}
    proposed = {("t", 0): [2, 1], ("t", 1): [2, 3], ("t", 2): [3, 1]}
    sizes = {("t", 0): 100, ("t", 1): 10, ("t", 2): 1}
    rep = report(current, proposed, brokers, sizes).to_dict()
    assert rep["partitions_changed"] == 3
    assert rep["partitions_moved"] == 2
    assert rep["replicas_moved"] == 2  # 3 joins t-1 and t-2
    assert rep["bytes_moved"] == 11
    assert rep["leaders_changed"] == 2  # t-0 (reorder) and t-2
    rows = {r["broker"]: r for r in rep["per_broker"]}
    assert rows[4]["target"] is False and rows[4]["replicas_after"] == 0
    assert (rows[3]["replicas_before"], rows[3]["replicas_after"], rows[3]["bytes_after"]) == (0, 2, 11)
    assert rep["balance"]["replicas"]["after"] == {"min": 2, "max": 2, "spread": 0, "stdev": 0.0}
    assert [(r["rack"], r["replicas_after"]) for r in rep["per_rack"]] == [("a", 4), ("b", 2)]


def test_report_without_sizes_has_no_bytes():
    rep = report({("t", 0): [1]}, {("t", 0): [2]}, [Broker(1), Broker(2)]).to_dict()
    assert rep["bytes_moved"] is None
    assert "bytes" not in rep["balance"]
    assert rep["per_rack"] == []


def test_parse_broker_list():
    assert parse_broker_list("3,1,2") == [Broker(3), Broker(1), Broker(2)]
    assert parse_broker_list("0:r1, 1:r2") == [Broker(0, "r1"), Broker(1, "r2")]
    import pytest

    from kafkatool.assign.errors import AssignError

    for bad, msg in [
        ("1,1", "duplicate entries: 1"),
        ("1,,2", "empty entry"),
        ("x", "'x' is not a broker id"),
        ("1:", "empty rack for broker 1"),
        ("-1", "negative"),
    ]:
        with pytest.raises(AssignError, match=msg):
            parse_broker_list(bad)
