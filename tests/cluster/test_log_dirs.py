"""kafkatool log-dirs describe against three `kafkatool serve` brokers: DescribeLogDirs goes to
each broker itself (not to the one bootstrapped from, nor to the controller)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from tests.cluster.conftest import SHORT_ZK_SESSION, wait_for

ck = pytest.importorskip("confluent_kafka")


def run(*args):
    res = CliRunner().invoke(app, ["log-dirs", "describe", *map(str, args)])
    assert "Traceback" not in res.output, res.output
    return res


# broker 3 is SIGKILLed and started again at once: it waits out its old session (1.5 x 3 s at
# most); the tool chose its brokers from the metadata of the kill's first tenth of a second
@SHORT_ZK_SESSION
def test_every_broker_answers_for_its_own_dirs(cluster):
    first = next(iter(cluster.brokers.values())).bootstrap
    res = CliRunner().invoke(
        app,
        ["topics", "create", "--topic", "spread", "--partitions", "3", "--replication-factor", "3",
         "--bootstrap-server", cluster.bootstrap],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    p = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(30):
        p.produce("spread", value=b"x" * 100, partition=i % 3)
    assert p.flush(30) == 0

    def disk() -> dict[tuple[int, str], int]:
        return {
            (i, f"spread-{n}"): sum(f.stat().st_size for f in (b.data_dir / f"spread-{n}").glob("*.log"))
            for i, b in cluster.brokers.items()
            for n in range(3)
        }

    def caught_up():
        d = disk()
        same = all(len({d[i, f"spread-{n}"] for i in cluster.brokers}) == 1 for n in range(3))
        return d if same and all(d.values()) else None

    # every follower caught up: each partition the same size on the three brokers
    sizes = wait_for(caught_up, 30, "the followers to catch up")
    res = run("--bootstrap-server", first, "--topic-list", "spread")
    assert res.exit_code == 0, res.output
    head, text = res.stdout.splitlines()[1:]
    assert head == "Received log directory information from brokers 1,2,3"
    doc = json.loads(text)
    assert [b["broker"] for b in doc["brokers"]] == [1, 2, 3]
    got = {
        (b["broker"], p["partition"]): (d["logDir"], p["size"], p["offsetLag"], p["isFuture"])
        for b in doc["brokers"]
        for d in b["logDirs"]
        for p in d["partitions"]
    }
    assert got == {
        (i, tp): (str(cluster.brokers[i].data_dir), size, 0, False) for (i, tp), size in sizes.items()
    }
    res = run("--bootstrap-server", first, "--broker-list", "3")
    assert res.exit_code == 0, res.output
    assert [b["broker"] for b in json.loads(res.stdout.splitlines()[2])["brokers"]] == [3]

    # a broker SIGKILLed, still in the metadata (its ZooKeeper session has not expired): asked
    # again as Kafka's admin client asks, until default.api.timeout.ms, then one line, exit 2
    import time

    from tests.broker.conftest import BrokerProcess

    dead: BrokerProcess = cluster.brokers[3]
    dead.kill()
    config = dead.data_dir.parent / "admin.properties"
    config.write_text("default.api.timeout.ms=1500\nrequest.timeout.ms=1000\n")
    began = time.monotonic()
    res = run("--bootstrap-server", first, "--command-config", config)
    took = time.monotonic() - began
    assert res.exit_code == 2 and 1.4 <= took < 10, (took, res.output)
    (line,) = res.stderr.splitlines()
    assert line.startswith("kafkatool: error: DescribeLogDirs at broker 3: timed out after ")
    assert "attempt(s) (default.api.timeout.ms 1500): " in line, line
    # back while the tool asks again (default.api.timeout.ms 60000): every broker's answer
    dead.spawn()
    res = run("--bootstrap-server", first, "--topic-list", "spread")
    assert res.exit_code == 0, res.output
    assert [b["broker"] for b in json.loads(res.stdout.splitlines()[2])["brokers"]] == [1, 2, 3]
