"""Damage in ``kafkatool-cluster.json`` (the standalone broker's embedded metadata) never makes a
traceback: what says which logs are whose or who may do what refuses the start with one line
naming the file, the key path and what was expected (exit 2); a credential, token or group config
that cannot be taken is left out and logged once (log/embedded_metadata says which and why)."""

from __future__ import annotations

import json
import logging

import pytest

from kafkatool.broker.metadata import METADATA_FILE, MetadataStore
from kafkatool.log import topic_settings
from kafkatool.log.embedded_metadata import EmbeddedMetadataError
from tests.broker.conftest import free_port
from tests.broker.test_serve_cli import run_serve

TOPIC = {"id": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": 2, "configs": {"retention.ms": "1000"}}
ACL = {
    "resource_type": "TOPIC",
    "name": "orders",
    "pattern_type": "LITERAL",
    "principal": "User:bob",
    "host": "*",
    "operation": "READ",
    "permission": "DENY",
}
CRED = "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096"


def _doc(**changes) -> dict:
    doc = {
        "format": 1,
        "cluster_id": "q1Sh-9_ISia_zwGINzRvyQ",
        "node_id": 1,
        "producer_ids_reserved": 1000,
        "topics": {"orders": dict(TOPIC)},
        "acls": [dict(ACL)],
    }
    doc.update(changes)
    return doc


def _write(d, doc) -> None:
    d.mkdir(parents=True, exist_ok=True)
    text = doc if isinstance(doc, str) else json.dumps(doc)
    (d / METADATA_FILE).write_text(text)


def _topic(**changes) -> dict:
    t = dict(TOPIC)
    t.update(changes)
    return {k: v for k, v in t.items() if v is not None}


REFUSED = [
    ("not-json", '{"topics": ', "unreadable cluster metadata: not JSON"),
    ("a-list", [1, 2], ": expected a JSON object, found a list"),
    ("format", _doc(format="1"), ': format: expected a format version (an integer from 1), found "1"'),
    ("cluster-id", _doc(cluster_id=5), ": cluster_id: expected a cluster id (a string), found 5"),
    ("node-id", _doc(node_id=[1]), ": node_id: expected a node id (an integer), found a list"),
    ("producer-ids", _doc(producer_ids_reserved=-1), ": producer_ids_reserved: expected a producer id"),
    ("topics", _doc(topics=5), ": topics: expected an object of topic name -> topic, found 5"),
    ("topic", _doc(topics={"orders": [1]}), ': topics["orders"]: expected a topic (an object), found a list'),
    (
        "topic-id-missing",
        _doc(topics={"orders": _topic(id=None)}),
        ': topics["orders"].id: expected a topic id (a Uuid string), found nothing',
    ),
    (
        "topic-id-bad",
        _doc(topics={"a.b": _topic(id="not-a-uuid")}),
        ': topics["a.b"].id: expected a topic id (a Uuid string), found "not-a-uuid"',
    ),
    (
        "partitions",
        _doc(topics={"orders": _topic(partitions="2")}),
        ': topics["orders"].partitions: expected a partition count (an integer from 1), found "2"',
    ),
    (
        "partitions-missing",
        _doc(topics={"orders": _topic(partitions=None)}),
        ': topics["orders"].partitions: expected a partition count (an integer from 1), found nothing',
    ),
    (
        "configs",
        _doc(topics={"orders": _topic(configs=["retention.ms"])}),
        ': topics["orders"].configs: expected an object of config name -> string, found a list',
    ),
    (
        "config-value",
        _doc(topics={"orders": _topic(configs={"retention.ms": {"v": 1}})}),
        ': topics["orders"].configs: expected an object of config name -> string, found an object',
    ),
    (
        "leader-epochs",
        _doc(topics={"orders": _topic(leader_epochs={"x": 1})}),
        ': topics["orders"].leader_epochs: expected an object of partition -> leader epoch',
    ),
    ("deleted-ids", _doc(deleted_topic_ids=["x"]), ": deleted_topic_ids: expected an object of topic id"),
    ("acls", _doc(acls={"a": 1}), ": acls: expected a list of ACL bindings, found an object"),
    ("acl", _doc(acls=[ACL, "x"]), ': acls[1]: expected an ACL binding (an object), found "x"'),
    (
        "acl-field",
        _doc(acls=[{k: v for k, v in ACL.items() if k != "principal"}]),
        ": acls[0].principal: expected a string, found nothing",
    ),
    (
        "acl-name",
        _doc(acls=[dict(ACL, operation="JUMP")]),
        ": acls[0]: expected an ACL binding Kafka loads, found a name Kafka does not know: JUMP",
    ),
]


@pytest.mark.parametrize(("doc", "words"), [(d, w) for _n, d, w in REFUSED], ids=[n for n, _d, _w in REFUSED])
def test_refused_damage_names_file_key_and_expectation(tmp_path, doc, words):
    d = tmp_path / "data"
    _write(d, doc)
    with pytest.raises(EmbeddedMetadataError) as info:
        MetadataStore([d], 1)
    text = str(info.value)
    assert text.startswith(f"{d / METADATA_FILE}: ") and words in text and "\n" not in text
    assert isinstance(info.value, OSError)  # serve's start-up refusal of a log dir it cannot open
    # the offline commands' topic-config layer reads the same file by the same rule: no configs
    # from it, a note instead of a traceback
    layer = topic_settings.read_embedded(d)
    if "Kafka does not know" in words:  # the ACL names are the broker's (security/acl)
        assert layer.topics == {"orders": {"retention.ms": "1000"}} and not layer.notes
    else:
        assert layer.topics == {} and layer.notes == [f"{text}; its topic configs are not used"]


def test_left_out_entries_are_logged_once_and_dropped_at_the_next_save(tmp_path, caplog):
    d = tmp_path / "data"
    _write(
        d,
        _doc(
            user_scram_credentials={
                "alice": ["x"],
                "bob": {"SCRAM-SHA-256": CRED},
                "carol": {"SCRAM-SHA-256": 5},
            },
            group_configs={"g1": {"consumer.session.timeout.ms": "50000"}, "g2": 5},
            delegation_tokens=5,
        ),
    )
    with caplog.at_level(logging.ERROR, logger="kafkatool.broker"):
        store = MetadataStore([d], 1)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    path = d / METADATA_FILE
    assert lines == [
        f'{path}: user_scram_credentials["alice"]: expected an object of SCRAM mechanism -> credential text, '
        "found a list; the entry (its logins fail) left out (dropped at the next save)",
        f'{path}: user_scram_credentials["carol"]: expected an object of SCRAM mechanism -> credential text, '
        "found an object; the entry (its logins fail) left out (dropped at the next save)",
        f'{path}: group_configs["g2"]: expected an object of config name -> string, found 5; the entry (the '
        "group runs on the broker's defaults) left out (dropped at the next save)",
        f"{path}: delegation_tokens: expected an object of token id -> token, found 5; every entry (its "
        "logins fail) left out (dropped at the next save)",
    ]
    # the rest is taken as it was
    assert store.user_scram == {"bob": {"SCRAM-SHA-256": CRED}}
    assert store.group_configs == {"g1": {"consumer.session.timeout.ms": "50000"}}
    assert store.delegation_tokens == {}
    assert list(store.topics) == ["orders"] and store.topics["orders"].configs == {"retention.ms": "1000"}
    assert len(store.acls) == 1 and store.producer_ids_reserved == 1000
    store.save()
    saved = json.loads(path.read_text())
    assert saved["user_scram_credentials"] == {"bob": {"SCRAM-SHA-256": CRED}}
    assert saved["group_configs"] == {"g1": {"consumer.session.timeout.ms": "50000"}}
    assert "delegation_tokens" not in saved
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="kafkatool.broker"):
        MetadataStore([d], 1)
    assert not caplog.records  # nothing left to say once saved


def test_whole_keys_left_out(tmp_path):
    d = tmp_path / "data"
    _write(d, _doc(user_scram_credentials="alice", group_configs=[1], delegation_tokens={"t1": "x"}))
    store = MetadataStore([d], 1)
    assert store.user_scram == {} and store.group_configs == {} and store.delegation_tokens == {}


def test_serve_refuses_a_damaged_file_with_one_line(tmp_path):
    """A real serve: exit 2, the last line names the file, the key path and what was expected."""
    d = tmp_path / "data"
    _write(d, _doc(topics={"orders": _topic(partitions=None)}))
    r = run_serve("-o", f"log.dirs={d}", "-o", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        f'kafkatool: error: cannot open the log dirs: {d / METADATA_FILE}: topics["orders"].partitions: '
        "expected a partition count (an integer from 1), found nothing"
    )
    _write(d, _doc(delegation_tokens=5, user_scram_credentials={"alice": []}))
    # left out, logged, and the broker runs
    from tests.broker.conftest import BrokerProcess

    b = BrokerProcess(d).start()
    try:
        text = b.log_text()
    finally:
        assert b.stop() == 0
    assert "Traceback" not in text
    assert "delegation_tokens: expected an object of token id -> token, found 5" in text
    assert 'user_scram_credentials[\\"alice\\"]' in text or 'user_scram_credentials["alice"]' in text


def test_users_log_dir_says_the_same_in_one_line(tmp_path):
    from tests.broker.test_delegation_tokens import run

    d = tmp_path / "data"
    _write(d, _doc(topics={"orders": _topic(id=None)}))
    r = run("users", "describe", "--log-dir", str(d))
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert (
        f'{d / METADATA_FILE}: topics["orders"].id: expected a topic id (a Uuid string), found nothing'
        in r.output
    )
