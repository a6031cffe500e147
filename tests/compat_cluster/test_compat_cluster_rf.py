"""compat_cluster_rf.py, the injection run_compat_cluster.py puts into the compat harness: both client
libraries' create_topics send replication factor N where the adapters ask for 1, in every call
form the libraries take, and nothing else changes. No broker: the wrapped method is a recorder."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

confluent_admin = pytest.importorskip("confluent_kafka.admin")
kafka = pytest.importorskip("kafka")

HERE = Path(__file__).resolve().parent


def load_module(name: str = "compat_cluster_rf_under_test"):
    """A fresh copy of the module (its WRAPPED list empty), not imported as sitecustomize, so it
    wraps nothing by itself."""
    spec = importlib.util.spec_from_file_location(name, HERE / "compat_cluster_rf.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def rf_mod(monkeypatch, tmp_path):
    monkeypatch.setenv("KAFKATOOL_COMPAT_RF_LOG", str(tmp_path / "created.jsonl"))
    monkeypatch.delenv("KAFKATOOL_COMPAT_REPLICATION_FACTOR", raising=False)
    mod = load_module()
    assert mod.RF is None and mod.WRAPPED == []
    return mod


@pytest.fixture
def recorders(monkeypatch):
    """Both libraries' create_topics replaced by recorders (restored after the test), so that
    ``install`` wraps the recorder exactly as it wraps the real method in the harness."""
    calls: dict[str, list] = {"confluent": [], "kafka-python": []}

    def confluent_rec(self, new_topics, **kw):
        calls["confluent"].append((new_topics, kw))
        return "confluent-result"

    def kafka_rec(self, new_topics, timeout_ms=None, **kw):
        calls["kafka-python"].append((new_topics, timeout_ms, kw))
        return "kafka-python-result"

    monkeypatch.setattr(confluent_admin.AdminClient, "create_topics", confluent_rec)
    monkeypatch.setattr(kafka.KafkaAdminClient, "create_topics", kafka_rec)
    return calls


def logged(tmp_path) -> list[dict]:
    p = tmp_path / "created.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def test_default_factor_is_3_and_env_overrides(rf_mod, monkeypatch):
    assert rf_mod.replication_factor() == 3
    monkeypatch.setenv("KAFKATOOL_COMPAT_REPLICATION_FACTOR", "2")
    assert rf_mod.replication_factor() == 2
    monkeypatch.setenv("KAFKATOOL_COMPAT_REPLICATION_FACTOR", "0")
    with pytest.raises(ValueError):
        rf_mod.replication_factor()


def test_confluent_newtopic_rf1_becomes_n(rf_mod, recorders, tmp_path):
    NewTopic = confluent_admin.NewTopic
    assert rf_mod.install(3) == 3
    given = [
        NewTopic("hx-a", 3, 1),  # the adapter's form
        NewTopic("hx-b", 1, 1, config={"min.insync.replicas": "2"}),
        NewTopic("keep-default", 2),  # -1: the broker's default, left alone
        NewTopic("keep-two", 2, 2),
        NewTopic("keep-assigned", 2, replica_assignment=[[1, 2], [2, 3]]),
    ]
    # called on the class with a stand-in self: no client, no connection (the method is the recorder)
    create_topics = confluent_admin.AdminClient.create_topics
    assert create_topics(object(), given, operation_timeout=20, request_timeout=25) == "confluent-result"
    [(sent, kw)] = recorders["confluent"]
    assert kw == {"operation_timeout": 20, "request_timeout": 25}
    assert [(t.topic, t.num_partitions, t.replication_factor) for t in sent] == [
        ("hx-a", 3, 3),
        ("hx-b", 1, 3),
        ("keep-default", 2, -1),
        ("keep-two", 2, 2),
        ("keep-assigned", 2, -1),
    ]
    assert sent[1].config == {"min.insync.replicas": "2"}
    assert sent[4].replica_assignment == [[1, 2], [2, 3]]
    assert [t.replication_factor for t in given[:2]] == [1, 1], "the caller's NewTopics are not changed"
    assert rf_mod.WRAPPED == [
        "confluent_kafka.admin.AdminClient.create_topics",
        "kafka.KafkaAdminClient.create_topics",
    ]
    assert [(x["lib"], x["topic"], x["given"], x["sent"]) for x in logged(tmp_path)] == [
        ("confluent-kafka", "hx-a", 1, 3),
        ("confluent-kafka", "hx-b", 1, 3),
    ]


def test_kafka_python_dict_form_rf1_becomes_n(rf_mod, recorders, tmp_path):
    rf_mod.install(3)
    given = {
        "hx-a": {"num_partitions": 3, "replication_factor": 1},  # the adapter's form
        "keep-default": {"num_partitions": 2},
        "keep-assigned": {"replication_factor": 1, "assignments": {0: [1, 2]}},
    }
    create_topics = kafka.KafkaAdminClient.create_topics
    assert create_topics(object(), given, timeout_ms=20000) == "kafka-python-result"
    [(sent, timeout_ms, _)] = recorders["kafka-python"]
    assert timeout_ms == 20000
    assert sent == {
        "hx-a": {"num_partitions": 3, "replication_factor": 3},
        "keep-default": {"num_partitions": 2},
        "keep-assigned": {"replication_factor": 1, "assignments": {0: [1, 2]}},
    }
    assert given["hx-a"]["replication_factor"] == 1, "the caller's dict is not changed"
    # what kafka-python itself makes of it: the CreateTopics request carries the factor
    request_topics = kafka.KafkaAdminClient._process_create_topics_input(sent)
    assert [(t.name, t.replication_factor) for t in request_topics] == [
        ("hx-a", 3),
        ("keep-default", -1),
        ("keep-assigned", 1),
    ]
    assert [(x["lib"], x["topic"], x["sent"]) for x in logged(tmp_path)] == [("kafka-python", "hx-a", 3)]


def test_kafka_python_newtopic_and_name_forms(rf_mod, recorders):
    from kafka.admin import NewTopic

    rf_mod.install(2)
    given = [NewTopic("hx-a", 3, 1), NewTopic("keep-two", 1, 2)]
    kafka.KafkaAdminClient.create_topics(object(), given)
    [(sent, _, _)] = recorders["kafka-python"]
    assert [(t.name, t.num_partitions, t.replication_factor) for t in sent] == [
        ("hx-a", 3, 2),
        ("keep-two", 1, 2),
    ]
    assert given[0].replication_factor == 1
    kafka.KafkaAdminClient.create_topics(object(), ["by-name"])
    assert recorders["kafka-python"][1][0] == ["by-name"]


def test_loaded_as_sitecustomize_it_wraps_both_at_start_up(tmp_path):
    """What run_compat_cluster.check_injection asks of the harness's interpreter."""
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text((HERE / "compat_cluster_rf.py").read_text())
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(inject), os.environ.get("PYTHONPATH", "")]),
        KAFKATOOL_COMPAT_REPLICATION_FACTOR="3",
    )
    probe = (
        "import json, sitecustomize as s, confluent_kafka.admin as c, kafka;"
        "print(json.dumps([s.__file__, s.RF, s.WRAPPED,"
        " c.AdminClient.create_topics.__module__, kafka.KafkaAdminClient.create_topics.__module__]))"
    )
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    where, rf, wrapped, m1, m2 = json.loads(r.stdout.splitlines()[-1])
    assert Path(where).parent == inject
    assert rf == 3
    assert wrapped == [
        "confluent_kafka.admin.AdminClient.create_topics",
        "kafka.KafkaAdminClient.create_topics",
    ]
    assert m1 == m2 == "sitecustomize"


def test_the_runner_flags_topics_without_n_replicas():
    """run_compat_cluster.check_replication on ZooKeeper's view: a harness topic left at one
    replica, one whose ISR is short, one the wrapper never saw and a missing internal topic fail."""
    spec = importlib.util.spec_from_file_location(
        "run_compat_cluster_under_test", HERE / "run_compat_cluster.py"
    )
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)

    def topic(replicas, isr=None):
        return {
            "replicas": {"0": replicas},
            "state": {"0": {"leader": replicas[0], "isr": isr or replicas}},
            "deleting": False,
        }

    zk = {
        "hx-good": topic([1, 2, 3]),
        "hx-rf1": topic([2]),
        "hx-short-isr": topic([1, 2, 3], [1, 2]),
        "hx-unseen": topic([1, 2, 3]),
        "__consumer_offsets": topic([3, 1, 2]),
        "other": topic([1]),
    }
    created = [{"topic": t, "sent": 3} for t in ("hx-good", "hx-rf1", "hx-short-isr", "hx-delete-topic-x")]
    problems, stats = runner.check_replication(zk, created, 3, ["__consumer_offsets", "__transaction_state"])
    assert stats == {"created": 4, "checked": 5, "deleted_by_harness": 1, "partitions": 5}
    assert [p.split(":")[0] for p in problems] == [
        "hx-rf1-0",
        "hx-short-isr-0",
        "hx-unseen",
        "__transaction_state",
    ]
    assert runner.check_replication({"hx-good": topic([1, 2, 3])}, created[:1], 3, []) == (
        [],
        {"created": 1, "checked": 1, "deleted_by_harness": 0, "partitions": 1},
    )
