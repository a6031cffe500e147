"""The authorizer's two decisions, on a real metadata store in a log dir, case by case against
Kafka's AclAuthorizer: authorizeAction (one named resource) and authorizeByResourceType (some
resource of a type; KafkaApis asks it of WRITE on topics for an idempotent InitProducerId)."""

from __future__ import annotations

import pytest

from kafkatool.broker.metadata import MetadataStore
from kafkatool.broker.security import acl as A

ALICE, HOST = "User:alice", "10.0.0.1"


def _auth(tmp_path, acls, *, everyone=False, supers=None) -> A.Authorizer:
    store = MetadataStore([tmp_path], 1)
    auth = A.Authorizer(store, super_users=supers, allow_if_no_acl=everyone)
    assert auth.create(acls) == [None] * len(acls)
    # what a restart reads back
    return A.Authorizer(MetadataStore([tmp_path], 1), super_users=supers, allow_if_no_acl=everyone)


def _b(name, op, perm=A.ALLOW, pattern=A.LITERAL, principal=ALICE, host="*", rtype=A.TOPIC):
    return A.AclBinding(rtype, name, pattern, principal, host, op, perm)


@pytest.mark.parametrize(
    "acls,everyone,expected",
    [
        ([], False, False),
        ([], True, True),
        ([_b("t", A.WRITE)], False, True),
        ([_b("t", A.READ)], False, False),  # no implied operations here
        ([_b("t", A.ALL)], False, True),
        ([_b("t", A.WRITE, principal="User:*")], False, True),
        ([_b("t", A.WRITE, host="10.0.0.2")], False, False),
        ([_b("t", A.WRITE, principal="User:bob")], False, False),
        # an ALLOW on a name that a DENY of the same name or a DENY prefix covers allows nothing
        ([_b("t", A.WRITE), _b("t", A.WRITE, A.DENY)], False, False),
        ([_b("team-t", A.WRITE), _b("team-", A.WRITE, A.DENY, A.PREFIXED)], False, False),
        ([_b("team-t", A.WRITE), _b("other-", A.WRITE, A.DENY, A.PREFIXED)], False, True),
        ([_b("team-", A.WRITE, pattern=A.PREFIXED), _b("te", A.ALL, A.DENY, A.PREFIXED)], False, False),
        (
            [_b("team-a-", A.WRITE, pattern=A.PREFIXED), _b("team-b", A.WRITE, A.DENY, A.PREFIXED)],
            False,
            True,
        ),
        # ALLOW on the literal wildcard wins over any narrower DENY ...
        ([_b("*", A.WRITE), _b("t", A.WRITE, A.DENY)], False, True),
        # ... a DENY on it denies everything, even with allow.everyone.if.no.acl.found
        ([_b("t", A.WRITE), _b("*", A.WRITE, A.DENY)], False, False),
        ([_b("*", A.ALL, A.DENY)], True, False),
        # allow.everyone.if.no.acl.found allows by type whatever other ACLs exist
        ([_b("t", A.WRITE, principal="User:bob")], True, True),
        ([_b("t", A.WRITE, A.DENY)], True, True),
    ],
)
def test_authorize_by_resource_type(tmp_path, acls, everyone, expected):
    auth = _auth(tmp_path, acls, everyone=everyone)
    assert auth.any_allowed(ALICE, HOST, A.WRITE, A.TOPIC) is expected


def test_super_users_bypass_both_decisions(tmp_path):
    auth = _auth(tmp_path, [_b("*", A.ALL, A.DENY, principal="User:*")], supers="User:ops; User:alice")
    assert auth.authorize(ALICE, HOST, A.WRITE, A.TOPIC, "t")
    assert auth.any_allowed(ALICE, HOST, A.WRITE, A.TOPIC)
    assert not auth.authorize("User:bob", HOST, A.WRITE, A.TOPIC, "t")


@pytest.mark.parametrize(
    "acls,op,name,expected",
    [
        ([_b("t", A.READ)], A.DESCRIBE, "t", True),
        ([_b("t", A.ALTER_CONFIGS)], A.DESCRIBE_CONFIGS, "t", True),
        ([_b("t", A.DESCRIBE)], A.READ, "t", False),
        ([_b("t", A.READ), _b("t", A.DESCRIBE, A.DENY)], A.DESCRIBE, "t", False),
        ([_b("t", A.ALL), _b("t", A.WRITE, A.DENY)], A.READ, "t", True),
        ([_b("t", A.ALL), _b("t", A.ALL, A.DENY, host=HOST)], A.READ, "t", False),
        ([_b("or", A.READ, pattern=A.PREFIXED)], A.READ, "orders", True),
        ([_b("or", A.READ, pattern=A.PREFIXED)], A.READ, "o", False),
        ([_b("*", A.READ)], A.READ, "anything", True),
        ([_b("*", A.READ), _b("x", A.READ, A.DENY, A.PREFIXED)], A.READ, "xyz", False),
    ],
)
def test_authorize_action(tmp_path, acls, op, name, expected):
    assert _auth(tmp_path, acls).authorize(ALICE, HOST, op, A.TOPIC, name) is expected


def _requester(auth, principal=ALICE):
    from types import SimpleNamespace

    conn = SimpleNamespace(principal=principal, peer=f"{HOST}:50000")
    return SimpleNamespace(broker=SimpleNamespace(authorizer=auth), connection=conn)


def _bits(*ops) -> int:
    return sum(1 << op for op in ops)


TOPIC_ALL = _bits(*A.SUPPORTED_OPERATIONS[A.TOPIC])
CLUSTER_ALL = _bits(*A.SUPPORTED_OPERATIONS[A.CLUSTER])


@pytest.mark.parametrize(
    "acls,everyone,rtype,name,expected",
    [
        ([_b("t", A.ALL)], False, A.TOPIC, "t", TOPIC_ALL),
        ([_b("t", A.READ)], False, A.TOPIC, "t", _bits(A.READ, A.DESCRIBE)),  # READ implies DESCRIBE
        ([_b("t", A.ALTER_CONFIGS)], False, A.TOPIC, "t", _bits(A.ALTER_CONFIGS, A.DESCRIBE_CONFIGS)),
        ([_b("t", A.ALL), _b("t", A.WRITE, A.DENY)], False, A.TOPIC, "t", TOPIC_ALL & ~_bits(A.WRITE)),
        ([_b("t", A.ALL)], False, A.TOPIC, "other", 0),
        ([], True, A.TOPIC, "t", TOPIC_ALL),  # allow.everyone.if.no.acl.found
        ([_b("g", A.READ, rtype=A.GROUP)], False, A.GROUP, "g", _bits(A.READ, A.DESCRIBE)),
        (
            [_b("kafka-cluster", A.ALTER, rtype=A.CLUSTER)],
            False,
            A.CLUSTER,
            "kafka-cluster",
            _bits(A.ALTER, A.DESCRIBE),
        ),  # fmt: skip
        # the cluster's operations only to who may DESCRIBE it
        (
            [_b("kafka-cluster", A.IDEMPOTENT_WRITE, rtype=A.CLUSTER)],
            False,
            A.CLUSTER,
            "kafka-cluster",
            0,
        ),  # fmt: skip
    ],
)
def test_authorized_operations(tmp_path, acls, everyone, rtype, name, expected):
    auth = _auth(tmp_path, acls, everyone=everyone)
    assert A.authorized_operations(_requester(auth), rtype, name) == expected


def test_authorized_operations_of_super_users_and_without_an_authorizer(tmp_path):
    auth = _auth(tmp_path, [_b("*", A.ALL, A.DENY, principal="User:*")], supers="User:ops")
    assert A.authorized_operations(_requester(auth, "User:ops"), A.TOPIC, "t") == TOPIC_ALL
    assert A.authorized_operations(_requester(auth), A.TOPIC, "t") == 0
    assert A.authorized_operations(_requester(None), A.CLUSTER, "kafka-cluster") == CLUSTER_ALL
    assert A.authorized_operations(_requester(None), A.GROUP, "g") == _bits(A.READ, A.DESCRIBE, A.DELETE)
