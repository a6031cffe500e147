"""Delegation tokens in a ZooKeeper-mode cluster of two ``kafkatool serve`` brokers: a token
created on one broker is Kafka's znode under /delegation_token/tokens with a token_change_
notification, and the other broker authenticates it; expired on the other, it logs in nowhere."""

from __future__ import annotations

import json

import pytest

from kafkatool.zk import codecs
from tests.broker.conftest import free_port
from tests.broker.test_delegation_tokens import INVALID, _props, run, token_login, token_props
from tests.cluster.conftest import Cluster, wait_for


@pytest.fixture
def token_cluster(tmp_path, zk_module):
    c = Cluster(tmp_path, zk_module, 2, ["num.partitions=1"])
    for b in c.brokers.values():
        sasl = free_port()
        b.extra += [
            f"listeners=PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "sasl.enabled.mechanisms=SCRAM-SHA-256",
            "delegation.token.secret.key=cluster-secret",
        ]
        b.sasl = f"127.0.0.1:{sasl}"
        b.dir = tmp_path
    try:
        yield c.start()
    finally:
        c.discard()


def test_a_token_made_on_one_broker_logs_in_on_the_other(token_cluster, tmp_path):
    c = token_cluster
    b1, b2 = c.brokers[1], c.brokers[2]
    add = "SCRAM-SHA-256=[password=alice-secret]"
    assert (
        run(
            "users", "alter", "--bootstrap-server", b1.bootstrap, "--user", "alice", "--add-config", add
        ).exit_code
        == 0
    )
    alice = _props(tmp_path / "alice.properties", "alice", "alice-secret")
    # /config/users reaches broker 2 through its change notification
    wait_for(lambda: token_login(b2, alice) is None, 15, "alice's SCRAM login on broker 2")
    res = run(
        "delegation-tokens", "--bootstrap-server", b1.sasl, "--command-config", alice, "--create", "--json"
    )
    assert res.exit_code == 0, res.output
    tok = json.loads(res.stdout)
    k = c.kazoo()
    try:
        data, _stat = k.get(f"/delegation_token/tokens/{tok['token_id']}")
        changes = k.get_children("/delegation_token/token_changes")
    finally:
        k.stop()
    info = codecs.decode_delegation_token(data)
    assert info.owner == "User:alice" and b'"owner":"User%3Aalice"' in data
    assert data == codecs.encode_delegation_token(info)  # DelegationTokenInfoZNode's bytes
    assert any(ch.startswith("token_change_") for ch in changes)
    props = token_props(b1, tok, "cluster-token")
    wait_for(lambda: token_login(b2, props) is None, 15, "the token's login on broker 2")
    res = run(
        "delegation-tokens",
        "--bootstrap-server",
        b2.sasl,
        "--command-config",
        alice,
        "--expire",
        "--hmac",
        tok["hmac"],
    )
    assert res.exit_code == 0, res.output
    wait_for(lambda: token_login(b1, props) is not None, 15, "the expired token refused on broker 1")
    assert INVALID in token_login(b1, props)
