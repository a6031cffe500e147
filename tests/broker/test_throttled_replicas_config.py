"""leader/follower.replication.throttled.replicas as Kafka 3.7 checks them (LogConfig's LIST with
ThrottledReplicaListValidator): ``*`` or ``partition:broker`` items, over a real request to
serve (standalone: KRaft's ConfigurationControlManager answers a ConfigException's message as it
is, INVALID_CONFIG)."""

from __future__ import annotations

import pytest

from kafkatool.log.topic_settings import SettingsError, throttled_replicas
from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated import alter_configs_request as AC
from kafkatool.protocol.generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from tests.broker.test_admin import create, describe
from tests.broker.wire import WireClient

LEADER = "leader.replication.throttled.replicas"
FOLLOWER = "follower.replication.throttled.replicas"
#: accepted values (as stored) and what they name
ACCEPTED = {
    "*": "*",
    " * ": "*",
    "": frozenset(),
    "0:1": frozenset({(0, 1)}),
    "0:1,1:2": frozenset({(0, 1), (1, 2)}),
    "0:1 , 1:2": frozenset({(0, 1), (1, 2)}),  # COMMA_WITH_WHITESPACE, then each item trimmed
    "0:1,\t1:2 ": frozenset({(0, 1), (1, 2)}),
    "007:01": frozenset({(7, 1)}),
    "0:1,,1:2": frozenset({(0, 1), (1, 2)}),  # an empty item matches ([0-9]+:[0-9]+)?
    "0:1,": frozenset({(0, 1)}),
    ",*": "*",  # the items joined are "*"
    "*,": "*",
}
#: refused values -> the list as ConfigException prints it
REFUSED = {
    "*,0:1": "[*, 0:1]",
    "all": "[all]",
    "0:1:2": "[0:1:2]",
    "0 : 1": "[0 : 1]",
    "0:-1": "[0:-1]",
    "0;1": "[0;1]",
    "a:1, 0:1": "[a:1, 0:1]",
    "\u0661:1": "[\u0661:1]",  # Java's [0-9] is ASCII
    "0:1,**": "[0:1, **]",
}


def message(name: str, shown: str) -> str:
    return (
        f"Invalid value {shown} for configuration {name}: {name} must be the literal '*' or a list of "
        "replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


def test_the_rule():
    for value, named in ACCEPTED.items():
        assert throttled_replicas(LEADER, value) == named, value
    for value, shown in REFUSED.items():
        with pytest.raises(SettingsError) as e:
            throttled_replicas(FOLLOWER, value)
        assert str(e.value) == message(FOLLOWER, shown)


def _inc(c, topic, *ops, validate_only=False):
    res = AlterConfigsResource(
        resource_type=2,
        resource_name=topic,
        configs=[AlterableConfig(name=n, config_operation=o, value=v) for n, o, v in ops],
    )
    r = c.request(44, 1, G.IncrementalAlterConfigsRequest(resources=[res], validate_only=validate_only))
    return r.responses[0].error_code, r.responses[0].error_message


def _legacy(c, topic, configs):
    res = AC.AlterConfigsResource(
        resource_type=2,
        resource_name=topic,
        configs=[AC.AlterableConfig(name=n, value=v) for n, v in configs],
    )
    r = c.request(33, 2, G.AlterConfigsRequest(resources=[res], validate_only=False)).responses[0]
    return r.error_code, r.error_message


def test_serve_takes_and_refuses_them_as_kafka(broker):
    with WireClient(broker.bootstrap) as c:
        # CreateTopics: refused with INVALID_CONFIG and the validator's message, nothing created
        r = create(c, "thr-bad", configs={LEADER: "0:1:2"})
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_CONFIG, message(LEADER, "[0:1:2]"))
        r = create(c, "thr-bad", configs={FOLLOWER: "*,0:1"}, validate_only=True)
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_CONFIG, message(FOLLOWER, "[*, 0:1]"))
        assert create(c, "thr-bad", validate_only=True).error_code == 0  # the name is free
        r = create(c, "thr", 2, configs={LEADER: "0:1 , 1:1", FOLLOWER: "*"})
        assert r.error_code == 0, r.error_message
        _, cfg = describe(c, "thr", keys=[LEADER, FOLLOWER])
        assert (cfg[LEADER].value, cfg[FOLLOWER].value) == ("0:1 , 1:1", "*")  # kept as given
        for value in ACCEPTED:
            assert _inc(c, "thr", (LEADER, 0, value), validate_only=True) == (0, None), value
        for value, shown in REFUSED.items():
            for name in (LEADER, FOLLOWER):
                want = (ErrorCode.INVALID_CONFIG, message(name, shown))
                assert _inc(c, "thr", (name, 0, value)) == want
                assert _legacy(c, "thr", [(name, value)]) == want
        # APPEND makes the list the rule is asked of: "*" appended to a replica list is refused
        assert _inc(c, "thr", (LEADER, 2, "*")) == (
            ErrorCode.INVALID_CONFIG,
            message(LEADER, "[0:1, 1:1, *]"),
        )
        assert _inc(c, "thr", (LEADER, 2, "1:2")) == (0, None)
        _, cfg = describe(c, "thr", keys=[LEADER, FOLLOWER])
        # ConfigurationControlManager.getParts splits at "," alone: the old items keep their spaces;
        # nothing refused was kept
        assert (cfg[LEADER].value, cfg[FOLLOWER].value) == ("0:1 , 1:1,1:2", "*")


def test_the_replication_quota_reads_them_by_the_same_rule():
    """ReplicationQuotaManager.isThrottled on broker 2 over topic_settings.throttled_replicas: a
    value the validator takes means what it names, one it refuses throttles nothing."""
    from kafkatool.broker.config import BrokerConfig
    from tests.broker.test_rates import _quota

    replicas = {"joined": ",*", "gaps": "0:2,,1:1, 3:2 ,", "refused": "*,0:2", "junk": "0:2:1"}
    q = _quota(BrokerConfig({}, {}, {}), replicas)
    assert q.is_throttled("joined", 5)
    assert [p for p in range(5) if q.is_throttled("gaps", p)] == [0, 3]
    assert not any(q.is_throttled(t, p) for t in ("refused", "junk") for p in range(3))
