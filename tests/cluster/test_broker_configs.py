"""Dynamic broker configs in a ZooKeeper-mode cluster: /config/brokers/<default> and
/config/brokers/<id> are two layers every broker reads (DynamicBrokerConfig), described with
their own sources; each broker answers DescribeConfigs for itself, and `kafkatool configs` and
`health` ask each broker about itself, as Kafka's AdminClient does."""

from __future__ import annotations

import json

from tests.broker.test_broker_configs import describe, inc
from tests.broker.wire import WireClient
from tests.cluster.conftest import kafkatool, wait_for, zk_json

RATE = "follower.replication.throttled.rate"


def test_default_and_per_broker_layers_in_zookeeper(cluster):
    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    # the default through ZooKeeper (kafka-configs --entity-default), broker 2's own through its API
    r = kafkatool(
        "configs", "alter", "--entity-type", "brokers", "--entity-default", "--add-config", f"{RATE}=1000",
        "--zookeeper", cluster.connect,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    with WireClient(b2.bootstrap) as c:
        assert inc(c, 4, "2", (RATE, 0, "2000")) == (0, None)
    assert zk_json(cluster, "/config/brokers/2")["config"] == {RATE: "2000"}

    def seen(broker, node, want) -> bool:
        with WireClient(broker.bootstrap) as c:
            e = describe(c, node, keys=[RATE], rtype=4)[1].get(RATE)
            return e is not None and (e.value, e.config_source) == want

    wait_for(lambda: seen(b1, "1", ("1000", 3)), 15, "broker 1 to read the default")
    wait_for(lambda: seen(b2, "2", ("2000", 2)), 15, "broker 2 to read its own value")
    with WireClient(b2.bootstrap) as c:
        _, d = describe(c, "", rtype=4)
        assert {n: (e.value, e.config_source) for n, e in d.items()} == {RATE: ("1000", 3)}
        e = describe(c, "2", keys=[RATE], rtype=4)[1][RATE]
        assert [(s.value, s.source) for s in e.synonyms] == [("2000", 2), ("1000", 3)]
        res, _ = describe(c, "1", rtype=4)  # a broker answers for itself only
        assert res.error_code == 42 and "expected 2 or empty string" in res.error_message
        assert inc(c, 4, "1", (RATE, 0, "5")) == (42, "Unexpected broker id, expected 2, but received 1")
    # kafka-configs --describe of broker 2 and --entity-default, asked through broker 1's address
    r = kafkatool(
        "configs", "describe", "--entity-type", "brokers", "--entity-name", "2", "--json",
        "--bootstrap-server", b1.bootstrap,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {x["name"]: x for x in map(json.loads, r.stdout.splitlines())}
    assert rows[RATE]["value"] == "2000" and rows[RATE]["source"] == "DYNAMIC_BROKER_CONFIG"
    r = kafkatool(
        "configs", "describe", "--entity-type", "brokers", "--entity-default", "--json",
        "--bootstrap-server", b1.bootstrap,
    )  # fmt: skip
    assert [json.loads(x)["name"] for x in r.stdout.splitlines()] == [RATE]
    # health describes every broker (each at its own address) and names the throttles left behind
    r = kafkatool("health", "--bootstrap-server", cluster.bootstrap, "--json")
    assert "Traceback" not in r.stderr and "DescribeConfigs" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert RATE in r.stdout
