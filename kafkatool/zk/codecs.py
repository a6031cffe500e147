"""Typed, version-tolerant codecs for the payloads Kafka keeps in ZooKeeper.

Pure functions: bytes in, dataclasses out (and back).  Decoders accept every
payload version Kafka 0.9-3.x wrote (see ZkData.scala), keep keys they do not
know in ``extra`` and only fail on bytes that cannot be what the path claims
(``ZkPayloadError`` with the byte position where JSON parsing stopped).
Encoders write the JSON Kafka writes: compact, with its ``version`` fields.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kafkatool.formats.errors import FormatError
from kafkatool.zk import paths
from kafkatool.zk.sanitizer import desanitize, sanitize


class ZkPayloadError(FormatError):
    """A znode payload that does not decode as the Kafka structure its path holds."""

    kind = "zk_payload"


# ---------------------------------------------------------------- helpers


def _dumps(obj: Any) -> bytes:
    # Kafka's Json.encodeAsBytes: compact Jackson output, UTF-8.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _text(data: bytes | None, what: str) -> str:
    if data is None:
        raise ZkPayloadError(f"{what}: no data")
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ZkPayloadError(f"{what}: not UTF-8 ({exc.reason})", exc.start) from None


def _json(data: bytes | None, what: str) -> Any:
    text = _text(data, what)
    if not text.strip():
        raise ZkPayloadError(f"{what}: empty payload, expected JSON", 0)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # JSONDecodeError.pos is a character index; report the byte offset.
        pos = len(text[: exc.pos].encode("utf-8"))
        raise ZkPayloadError(f"{what}: invalid JSON ({exc.msg})", pos) from None


def _object(data: bytes | None, what: str) -> dict:
    obj = _json(data, what)
    if not isinstance(obj, dict):
        raise ZkPayloadError(f"{what}: expected a JSON object, got {type(obj).__name__}", 0)
    return obj


_MISSING = object()


def _int(obj: dict, key: str, what: str, default: Any = _MISSING, *, allow_str: bool = False) -> Any:
    value = obj.get(key, _MISSING)
    if value is _MISSING or value is None:
        if default is _MISSING:
            raise ZkPayloadError(f"{what}: missing key {key!r}")
        return default
    if isinstance(value, bool):
        raise ZkPayloadError(f"{what}: {key!r} is a boolean, expected an integer")
    if isinstance(value, int):
        return value
    if allow_str and isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise ZkPayloadError(f"{what}: {key!r} = {value!r} is not an integer")


def _str(obj: dict, key: str, what: str, default: Any = _MISSING) -> Any:
    value = obj.get(key, _MISSING)
    if value is _MISSING or value is None:
        if default is _MISSING:
            raise ZkPayloadError(f"{what}: missing key {key!r}")
        return default
    if not isinstance(value, str):
        raise ZkPayloadError(f"{what}: {key!r} = {value!r} is not a string")
    return value


def _int_list(value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ZkPayloadError(f"{what}: expected a list of integers, got {value!r}")
    return list(value)


def _extra(obj: dict, known: Iterable[str]) -> dict:
    known = set(known)
    return {k: v for k, v in obj.items() if k not in known}


def to_jsonable(value: Any) -> Any:
    """Dataclasses to plain dicts (int dict keys stay ints; json.dumps turns them into strings)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


# ---------------------------------------------------------------- /cluster/id


@dataclass
class ClusterId:
    id: str
    version: Any = "1"  # Kafka writes the version as the string "1"
    extra: dict = field(default_factory=dict)


def decode_cluster_id(data: bytes | None) -> ClusterId:
    what = "/cluster/id"
    obj = _object(data, what)
    return ClusterId(
        id=_str(obj, "id", what), version=obj.get("version"), extra=_extra(obj, ("id", "version"))
    )


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


# ---------------------------------------------------------------- /controller, /controller_epoch


@dataclass
class ControllerInfo:
    broker_id: int
    timestamp: int | None
    version: int
    kraft_controller_epoch: int = -1  # v2 (3.4+); -1 for a ZK controller
    extra: dict = field(default_factory=dict)

    @property
    def is_kraft(self) -> bool:
        return self.kraft_controller_epoch >= 0


def decode_controller(data: bytes | None) -> ControllerInfo:
    what = "/controller"
    obj = _object(data, what)
    return ControllerInfo(
        broker_id=_int(obj, "brokerid", what),
        timestamp=_int(obj, "timestamp", what, None, allow_str=True),
        version=_int(obj, "version", what, 1),
        kraft_controller_epoch=_int(obj, "kraftControllerEpoch", what, -1),
        extra=_extra(obj, ("brokerid", "timestamp", "version", "kraftControllerEpoch")),
    )


def encode_controller(
    broker_id: int, timestamp_ms: int, *, version: int = 2, kraft_controller_epoch: int = -1
) -> bytes:
    obj: dict[str, Any] = {"version": version, "brokerid": broker_id, "timestamp": str(timestamp_ms)}
    if version >= 2:
        obj["kraftControllerEpoch"] = kraft_controller_epoch
    return _dumps(obj)


def decode_controller_epoch(data: bytes | None) -> int:
    text = _text(data, "/controller_epoch").strip()
    try:
        return int(text)
    except ValueError:
        raise ZkPayloadError(f"/controller_epoch: {text[:40]!r} is not a decimal integer", 0) from None


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


# ---------------------------------------------------------------- /brokers/ids/N


@dataclass
class Endpoint:
    listener: str
    security_protocol: str
    host: str | None
    port: int

    @property
    def connection_string(self) -> str:
        host = self.host or ""
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        return f"{self.listener}://{host}:{self.port}"


def parse_endpoint(text: str, protocol_map: dict | None = None) -> Endpoint:
    """``LISTENER://host:port`` as in ``advertised.listeners`` (IPv6 hosts in brackets)."""
    listener, sep, rest = text.partition("://")
    if not sep or not listener:
        raise ZkPayloadError(f"endpoint {text!r}: expected LISTENER://host:port")
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        port_text = tail[1:] if tail.startswith(":") else ""
    else:
        host, _, port_text = rest.rpartition(":")
    try:
        port = int(port_text)
    except ValueError:
        raise ZkPayloadError(f"endpoint {text!r}: bad port {port_text!r}") from None
    protocol = (protocol_map or {}).get(listener, listener)
    return Endpoint(listener=listener, security_protocol=protocol, host=host or None, port=port)


@dataclass
class BrokerRegistration:
    broker_id: int
    version: int
    host: str | None
    port: int
    jmx_port: int
    timestamp: int | None
    endpoints: list[Endpoint]
    rack: str | None = None
    listener_security_protocol_map: dict | None = None  # v4+
    features: dict = field(default_factory=dict)  # v5+: {name: {"min_version": a, "max_version": b}}
    extra: dict = field(default_factory=dict)


_BROKER_KEYS = (
    "version",
    "host",
    "port",
    "jmx_port",
    "timestamp",
    "endpoints",
    "rack",
    "listener_security_protocol_map",
    "features",
)


def decode_broker(data: bytes | None, broker_id: int) -> BrokerRegistration:
    what = f"/brokers/ids/{broker_id}"
    obj = _object(data, what)
    version = _int(obj, "version", what, 1)
    protocol_map = obj.get("listener_security_protocol_map")
    if protocol_map is not None and not isinstance(protocol_map, dict):
        raise ZkPayloadError(f"{what}: listener_security_protocol_map is not an object")
    host = obj.get("host")
    port = _int(obj, "port", what, -1)
    raw_endpoints = obj.get("endpoints")
    if raw_endpoints is None:
        # v1: only host/port, implicitly PLAINTEXT.
        endpoints = [Endpoint("PLAINTEXT", "PLAINTEXT", host, port)] if host is not None and port >= 0 else []
    else:
        if not isinstance(raw_endpoints, list) or not all(isinstance(e, str) for e in raw_endpoints):
            raise ZkPayloadError(f"{what}: endpoints is not a list of strings")
        try:
            endpoints = [parse_endpoint(e, protocol_map) for e in raw_endpoints]
        except ZkPayloadError as exc:
            raise ZkPayloadError(f"{what}: {exc.message}") from None
    features = obj.get("features") or {}
    if not isinstance(features, dict):
        raise ZkPayloadError(f"{what}: features is not an object")
    rack = obj.get("rack")
    return BrokerRegistration(
        broker_id=broker_id,
        version=version,
        host=host if isinstance(host, str) else None,
        port=port,
        jmx_port=_int(obj, "jmx_port", what, -1),
        timestamp=_int(obj, "timestamp", what, None, allow_str=True),
        endpoints=endpoints,
        rack=rack if isinstance(rack, str) else None,
        listener_security_protocol_map=protocol_map,
        features=features,
        extra=_extra(obj, _BROKER_KEYS),
    )


def encode_broker(
    endpoints: list[str],
    *,
    version: int = 5,
    jmx_port: int = -1,
    timestamp_ms: int,
    rack: str | None = None,
    protocol_map: dict[str, str] | None = None,
    features: dict[str, dict[str, int]] | None = None,
) -> bytes:
    """A broker registration as BrokerIdZNode.encode writes it for ``version`` (1-5)."""
    parsed = [parse_endpoint(e, protocol_map) for e in endpoints]
    plaintext = next((e for e in parsed if e.security_protocol == "PLAINTEXT"), None)
    obj: dict[str, Any] = {"version": version}
    obj["host"] = plaintext.host if plaintext else None
    obj["port"] = plaintext.port if plaintext else -1
    if version >= 2:
        obj["endpoints"] = [e.connection_string for e in parsed]
    obj["jmx_port"] = jmx_port
    obj["timestamp"] = str(timestamp_ms)
    if rack is not None and version >= 3:
        obj["rack"] = rack
    if version >= 4:
        obj["listener_security_protocol_map"] = {e.listener: e.security_protocol for e in parsed}
    if version >= 5:
        obj["features"] = features or {}
    return _dumps(obj)


# ---------------------------------------------------------------- /brokers/topics/T and partition state


@dataclass
class TopicAssignment:
    topic: str
    version: int
    partitions: dict[int, list[int]]
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)  # v2+
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)  # v2+
    topic_id: str | None = None  # v3 (2.8+)
    extra: dict = field(default_factory=dict)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)


def _partition_map(value: Any, what: str) -> dict[int, list[int]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ZkPayloadError(f"{what}: expected an object of partition -> replicas")
    out: dict[int, list[int]] = {}
    for key, replicas in value.items():
        try:
            pid = int(key)
        except ValueError:
            raise ZkPayloadError(f"{what}: partition key {key!r} is not a number") from None
        out[pid] = _int_list(replicas, f"{what}[{key}]")
    return dict(sorted(out.items()))


def decode_topic(data: bytes | None, topic: str) -> TopicAssignment:
    what = f"/brokers/topics/{topic}"
    obj = _object(data, what)
    topic_id = obj.get("topic_id")
    return TopicAssignment(
        topic=topic,
        version=_int(obj, "version", what, 1),
        partitions=_partition_map(obj.get("partitions"), f"{what} partitions"),
        adding_replicas=_partition_map(obj.get("adding_replicas"), f"{what} adding_replicas"),
        removing_replicas=_partition_map(obj.get("removing_replicas"), f"{what} removing_replicas"),
        topic_id=topic_id if isinstance(topic_id, str) else None,
        extra=_extra(obj, ("version", "partitions", "adding_replicas", "removing_replicas", "topic_id")),
    )


def encode_topic(
    partitions: dict[int, list[int]],
    *,
    adding: dict[int, list[int]] | None = None,
    removing: dict[int, list[int]] | None = None,
    topic_id: str | None = None,
    version: int | None = None,
) -> bytes:
    """TopicZNode.encode: v1 partitions only; v2 adds adding/removing; v3 adds topic_id."""
    if version is None:
        version = 3 if topic_id is not None else 2
    obj: dict[str, Any] = {
        "version": version,
        "partitions": {str(p): r for p, r in sorted(partitions.items())},
    }
    if version >= 2:
        obj["adding_replicas"] = {str(p): r for p, r in sorted((adding or {}).items()) if r}
        obj["removing_replicas"] = {str(p): r for p, r in sorted((removing or {}).items()) if r}
    if topic_id is not None and version >= 3:
        obj["topic_id"] = topic_id
    return _dumps(obj)


@dataclass
class PartitionState:
    leader: int
    leader_epoch: int
    controller_epoch: int
    isr: list[int]
    version: int = 1
    leader_recovery_state: int = 0  # 1 = RECOVERING (3.2+), key only present while recovering
    extra: dict = field(default_factory=dict)

    @property
    def has_leader(self) -> bool:
        return self.leader >= 0


def decode_partition_state(data: bytes | None, where: str = "partition state") -> PartitionState:
    obj = _object(data, where)
    isr = obj.get("isr")
    return PartitionState(
        leader=_int(obj, "leader", where),
        leader_epoch=_int(obj, "leader_epoch", where),
        controller_epoch=_int(obj, "controller_epoch", where),
        isr=_int_list(isr, f"{where} isr") if isr is not None else [],
        version=_int(obj, "version", where, 1),
        leader_recovery_state=_int(obj, "leader_recovery_state", where, 0),
        extra=_extra(
            obj, ("leader", "leader_epoch", "controller_epoch", "isr", "version", "leader_recovery_state")
        ),
    )


def encode_partition_state(
    leader: int, leader_epoch: int, controller_epoch: int, isr: list[int], *, leader_recovery_state: int = 0
) -> bytes:
    obj: dict[str, Any] = {
        "version": 1,
        "leader": leader,
        "leader_epoch": leader_epoch,
        "controller_epoch": controller_epoch,
        "isr": list(isr),
    }
    if leader_recovery_state:
        obj["leader_recovery_state"] = leader_recovery_state
    return _dumps(obj)


# ---------------------------------------------------------------- /admin/*


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass
class PartitionReassignment:
    topic: str
    partition: int
    replicas: list[int]
    log_dirs: list[str] | None = None  # only in the tool's file format, never in the znode


@dataclass
class ReassignPartitions:
    version: int
    partitions: list[PartitionReassignment]
    extra: dict = field(default_factory=dict)


def _partition_entries(obj: dict, what: str) -> list[dict]:
    entries = obj.get("partitions")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ZkPayloadError(f"{what}: 'partitions' is not a list of objects")
    return entries


def decode_reassign_partitions(data: bytes | None) -> ReassignPartitions:
    what = paths.REASSIGN_PARTITIONS
    obj = _object(data, what)
    out = []
    for i, e in enumerate(_partition_entries(obj, what)):
        w = f"{what} partitions[{i}]"
        log_dirs = e.get("log_dirs")
        out.append(
            PartitionReassignment(
                topic=_str(e, "topic", w),
                partition=_int(e, "partition", w),
                replicas=_int_list(e.get("replicas"), f"{w} replicas"),
                log_dirs=list(log_dirs) if isinstance(log_dirs, list) else None,
            )
        )
    return ReassignPartitions(
        version=_int(obj, "version", what, 1), partitions=out, extra=_extra(obj, ("version", "partitions"))
    )


def encode_reassign_partitions(assignment: Any) -> bytes:
    """The legacy znode: ``{"version":1,"partitions":[{"topic","partition","replicas"}]}`` (no log_dirs).

    ``assignment`` is a mapping ``{(topic, partition) | TopicPartition: replicas}`` or an iterable of
    ``((topic, partition), replicas)`` pairs, ``(topic, partition, replicas)`` triples or
    ``PartitionReassignment``; entries are written in the order given.
    """
    items = assignment.items() if isinstance(assignment, dict) else assignment
    entries = []
    for item in items:
        if isinstance(item, PartitionReassignment):
            topic, partition, replicas = item.topic, item.partition, item.replicas
        elif len(item) == 3:
            topic, partition, replicas = item
        else:
            tp, replicas = item
            topic, partition = (tp.topic, tp.partition) if isinstance(tp, TopicPartition) else tp
        entries.append({"topic": topic, "partition": int(partition), "replicas": [int(r) for r in replicas]})
    return _dumps({"version": 1, "partitions": entries})


@dataclass
class PartitionList:
    """Preferred replica election and ISR change notification payloads."""

    version: int
    partitions: list[TopicPartition]
    extra: dict = field(default_factory=dict)


def decode_partition_list(data: bytes | None, what: str) -> PartitionList:
    obj = _object(data, what)
    out = []
    for i, e in enumerate(_partition_entries(obj, what)):
        w = f"{what} partitions[{i}]"
        out.append(TopicPartition(_str(e, "topic", w), _int(e, "partition", w)))
    return PartitionList(
        version=_int(obj, "version", what, 1), partitions=out, extra=_extra(obj, ("version", "partitions"))
    )


def encode_partition_list(partitions: Iterable[TopicPartition | tuple[str, int]]) -> bytes:
    entries = []
    for tp in partitions:
        topic, partition = (tp.topic, tp.partition) if isinstance(tp, TopicPartition) else tp
        entries.append({"topic": topic, "partition": partition})
    return _dumps({"version": 1, "partitions": entries})


# ---------------------------------------------------------------- notifications


@dataclass
class LogDirEvent:
    version: int
    broker: int
    event: int  # 1 = log dir failure

    @property
    def event_name(self) -> str:
        return {1: "LogDirFailure"}.get(self.event, f"unknown({self.event})")


#: LogDirEventNotificationZNode's one event: a log dir of the broker failed
LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event(broker_id: int) -> bytes:
    """LogDirEventNotificationSequenceZNode.encode: ``{"version":1,"broker":N,"event":1}``."""
    return _dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes | None) -> LogDirEvent:
    what = "log dir event"
    obj = _object(data, what)
    return LogDirEvent(_int(obj, "version", what, 1), _int(obj, "broker", what), _int(obj, "event", what, 1))


@dataclass
class EntityConfig:
    version: int
    config: dict[str, str]
    extra: dict = field(default_factory=dict)


def decode_entity_config(data: bytes | None, what: str = "entity config") -> EntityConfig:
    if data is None or not bytes(data).strip():
        return EntityConfig(version=1, config={})  # Kafka treats a missing/empty node as no overrides
    obj = _object(data, what)
    config = obj.get("config") or {}
    if not isinstance(config, dict):
        raise ZkPayloadError(f"{what}: 'config' is not an object")
    return EntityConfig(
        version=_int(obj, "version", what, 1),
        config={str(k): v if isinstance(v, str) else json.dumps(v) for k, v in config.items()},
        extra=_extra(obj, ("version", "config")),
    )


def encode_entity_config(config: dict[str, str]) -> bytes:
    return _dumps({"version": 1, "config": {k: str(v) for k, v in config.items()}})


@dataclass
class ConfigChange:
    version: int
    entity_path: str  # "topics/foo", "users/alice/clients/app"


def decode_config_change(data: bytes | None) -> ConfigChange:
    what = "config change notification"
    obj = _object(data, what)
    version = _int(obj, "version", what, 1)
    if "entity_path" in obj:
        return ConfigChange(version, _str(obj, "entity_path", what))
    # v1: {"version":1,"entity_type":"topics","entity_name":"foo"}
    return ConfigChange(version, f"{_str(obj, 'entity_type', what)}/{_str(obj, 'entity_name', what)}")


def encode_config_change(entity_path: str, *, version: int = 2) -> bytes:
    if version == 1:
        entity_type, _, name = entity_path.partition("/")
        return _dumps({"version": 1, "entity_type": entity_type, "entity_name": name})
    return _dumps({"version": 2, "entity_path": entity_path})


# ---------------------------------------------------------------- ACLs


@dataclass
class Acl:
    principal: str
    permission_type: str  # Allow | Deny
    operation: str
    host: str


@dataclass
class AclSet:
    version: int
    acls: list[Acl]
    legacy_format: bool = False  # pre-2.0 "operations"/"hosts" lists


def decode_acls(data: bytes | None, what: str = "acls") -> AclSet:
    obj = _object(data, what)
    raw = obj.get("acls")
    if not isinstance(raw, list) or not all(isinstance(a, dict) for a in raw):
        raise ZkPayloadError(f"{what}: 'acls' is not a list of objects")
    acls: list[Acl] = []
    legacy = False
    for i, a in enumerate(raw):
        w = f"{what} acls[{i}]"
        principal, permission = _str(a, "principal", w), _str(a, "permissionType", w)
        if "operations" in a or "hosts" in a:
            # 0.9-1.x wrote sets of operations and hosts per entry.
            legacy = True
            ops, hosts = a.get("operations") or [], a.get("hosts") or []
            if not isinstance(ops, list) or not isinstance(hosts, list):
                raise ZkPayloadError(f"{w}: 'operations' and 'hosts' must be lists")
            acls.extend(Acl(principal, permission, str(op), str(h)) for op in ops for h in hosts)
        else:
            acls.append(Acl(principal, permission, _str(a, "operation", w), _str(a, "host", w)))
    return AclSet(version=_int(obj, "version", what, 1), acls=acls, legacy_format=legacy)


def encode_acls(acls: Iterable[Acl]) -> bytes:
    return _dumps(
        {
            "version": 1,
            "acls": [
                {
                    "principal": a.principal,
                    "permissionType": a.permission_type,
                    "operation": a.operation,
                    "host": a.host,
                }
                for a in acls
            ],
        }
    )


@dataclass
class AclChange:
    resource_type: str
    name: str
    pattern_type: str = "LITERAL"
    version: int | None = None


def decode_acl_change(data: bytes | None) -> AclChange:
    text = _text(data, "acl change")
    resource_type, sep, name = text.partition(":")
    if not sep:
        raise ZkPayloadError(f"acl change: expected ResourceType:name, got {text[:60]!r}", 0)
    return AclChange(resource_type, name)


def decode_extended_acl_change(data: bytes | None) -> AclChange:
    what = "extended acl change"
    obj = _object(data, what)
    return AclChange(
        _str(obj, "resourceType", what),
        _str(obj, "name", what),
        _str(obj, "patternType", what),
        _int(obj, "version", what, 1),
    )


def encode_acl_change(resource_type: str, name: str, pattern_type: str = "LITERAL") -> bytes:
    if pattern_type.upper() == "LITERAL":
        return f"{resource_type}:{name}".encode()
    return _dumps(
        {"version": 1, "resourceType": resource_type, "name": name, "patternType": pattern_type.upper()}
    )


# ---------------------------------------------------------------- delegation tokens


def parse_kafka_principal(text: str) -> tuple[str, str]:
    """SecurityUtils.parseKafkaPrincipal: ``Type:name`` split at the first colon; ValueError
    (IllegalArgumentException) with Kafka's message otherwise."""
    if text:
        ptype, sep, name = text.partition(":")
        if sep:
            return ptype, name
    raise ValueError(f"expected a string in format principalType:principalName but got {text}")


#: DelegationTokenManagerZk.CurrentVersion
DELEGATION_TOKEN_VERSION = 3
#: the order Jackson writes DelegationTokenManagerZk.toJsonCompatibleMap in: a Scala 2.13
#: immutable HashMap of these eight keys (``mutable.Map.toMap``) iterates so (checked with
#: scala-library 2.13 on a JDK 17); the keys are fixed, so the order is too
_TOKEN_KEY_ORDER = (
    "issueTimestamp",
    "renewers",
    "tokenRequester",
    "tokenId",
    "owner",
    "expiryTimestamp",
    "maxTimestamp",
    "version",
)


@dataclass
class DelegationTokenInfo:
    """Kafka's TokenInformation: principals as ``Type:name`` strings, times in epoch ms."""

    token_id: str
    owner: str
    token_requester: str
    renewers: list[str]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int

    def owner_or_renewer(self, principal: str) -> bool:
        """TokenInformation.ownerOrRenewer."""
        return principal in (self.owner, self.token_requester) or principal in self.renewers

    def may_renew(self, principal: str) -> bool:
        """DelegationTokenManagerZk.allowedToRenew: the owner or a renewer (not the requester)."""
        return principal == self.owner or principal in self.renewers


def delegation_token_json(info: DelegationTokenInfo) -> dict:
    """DelegationTokenManagerZk.toJsonCompatibleMap in Jackson's order (principals sanitized)."""
    values = {
        "version": DELEGATION_TOKEN_VERSION,
        "owner": sanitize(info.owner),
        "tokenRequester": sanitize(info.token_requester),
        "renewers": [sanitize(r) for r in info.renewers],
        "issueTimestamp": info.issue_timestamp,
        "maxTimestamp": info.max_timestamp,
        "expiryTimestamp": info.expiry_timestamp,
        "tokenId": info.token_id,
    }
    return {k: values[k] for k in _TOKEN_KEY_ORDER}


def encode_delegation_token(info: DelegationTokenInfo) -> bytes:
    """DelegationTokenInfoZNode.encode: the bytes of ``/delegation_token/tokens/<tokenId>``."""
    return _dumps(delegation_token_json(info))


def delegation_token_from_json(obj: Any, what: str = "delegation token") -> DelegationTokenInfo:
    """DelegationTokenManagerZk.fromBytes of a parsed object: versions 1-3 (before 3 the
    requester is the owner); ZkPayloadError for anything it would refuse."""
    if not isinstance(obj, dict):
        raise ZkPayloadError(f"{what}: expected a JSON object, got {type(obj).__name__}", 0)
    version = _int(obj, "version", what)
    if not 0 < version <= DELEGATION_TOKEN_VERSION:
        raise ZkPayloadError(f"{what}: version {version} is not 1-{DELEGATION_TOKEN_VERSION}")

    def principal(value: Any, key: str) -> str:
        if not isinstance(value, str):
            raise ZkPayloadError(f"{what}: {key!r} is not a string")
        try:
            text = desanitize(value)
            parse_kafka_principal(text)
        except ValueError as exc:
            raise ZkPayloadError(f"{what}: {key!r}: {exc}") from None
        return text

    owner = principal(_str(obj, "owner", what), "owner")
    requester = principal(_str(obj, "tokenRequester", what), "tokenRequester") if version >= 3 else owner
    renewers = obj.get("renewers")
    if not isinstance(renewers, list):
        raise ZkPayloadError(f"{what}: 'renewers' is not a list")
    return DelegationTokenInfo(
        token_id=_str(obj, "tokenId", what),
        owner=owner,
        token_requester=requester,
        renewers=[principal(r, "renewers") for r in renewers],
        issue_timestamp=_int(obj, "issueTimestamp", what),
        max_timestamp=_int(obj, "maxTimestamp", what),
        expiry_timestamp=_int(obj, "expiryTimestamp", what),
    )


def decode_delegation_token(data: bytes | None, what: str = "delegation token") -> DelegationTokenInfo:
    """DelegationTokenInfoZNode.decode."""
    return delegation_token_from_json(_json(data, what), what)


def encode_token_change(token_id: str) -> bytes:
    """DelegationTokenChangeNotificationSequenceZNode.encode: the token id's UTF-8 bytes."""
    return token_id.encode("utf-8")


# ---------------------------------------------------------------- producer ids, features, migration


@dataclass
class ProducerIdBlock:
    version: int
    broker: int
    block_start: int
    block_end: int


def decode_producer_id_block(data: bytes | None) -> ProducerIdBlock | None:
    if data is None or not bytes(data).strip():
        return None  # created empty at broker start, filled by the first allocation
    what = paths.LATEST_PRODUCER_ID_BLOCK
    obj = _object(data, what)
    return ProducerIdBlock(
        _int(obj, "version", what, 1),
        _int(obj, "broker", what),
        _int(obj, "block_start", what, allow_str=True),
        _int(obj, "block_end", what, allow_str=True),
    )


def encode_producer_id_block(broker_id: int, block_start: int, block_end: int) -> bytes:
    return _dumps(
        {"version": 1, "broker": broker_id, "block_start": str(block_start), "block_end": str(block_end)}
    )


@dataclass
class FeatureNode:
    version: int
    status: int  # 0 disabled, 1 enabled
    features: dict[str, dict[str, int]]  # name -> {"min_version_level"?, "max_version_level"}

    @property
    def enabled(self) -> bool:
        return self.status == 1


def decode_feature(data: bytes | None) -> FeatureNode:
    what = paths.FEATURE
    obj = _object(data, what)
    features = obj.get("features") or {}
    if not isinstance(features, dict) or not all(isinstance(v, dict) for v in features.values()):
        raise ZkPayloadError(f"{what}: 'features' is not an object of objects")
    return FeatureNode(_int(obj, "version", what, 1), _int(obj, "status", what, 1), features)


def encode_feature(features: dict[str, dict[str, int]], *, status: int = 1, version: int = 2) -> bytes:
    if version >= 2:  # v2 (IBP >= 3.3) keeps only the max level
        features = {k: {"max_version_level": v["max_version_level"]} for k, v in features.items()}
    return _dumps({"version": version, "status": status, "features": features})


@dataclass
class MigrationState:
    version: int
    kraft_controller_id: int
    kraft_controller_epoch: int
    kraft_metadata_offset: int
    kraft_metadata_epoch: int


def decode_migration(data: bytes | None) -> MigrationState:
    what = paths.MIGRATION
    obj = _object(data, what)
    return MigrationState(
        _int(obj, "version", what, 0),
        _int(obj, "kraft_controller_id", what, -1),
        _int(obj, "kraft_controller_epoch", what, -1),
        _int(obj, "kraft_metadata_offset", what, -1),
        _int(obj, "kraft_metadata_epoch", what, -1),
    )


def encode_migration(
    controller_id: int, controller_epoch: int, metadata_offset: int, metadata_epoch: int
) -> bytes:
    return _dumps(
        {
            "version": 0,
            "kraft_controller_id": controller_id,
            "kraft_controller_epoch": controller_epoch,
            "kraft_metadata_offset": metadata_offset,
            "kraft_metadata_epoch": metadata_epoch,
        }
    )


def decode_consumer_offset(data: bytes | None) -> int:
    text = _text(data, "consumer offset").strip()
    try:
        return int(text)
    except ValueError:
        raise ZkPayloadError(f"consumer offset: {text[:40]!r} is not a decimal integer", 0) from None


def decode_empty(data: bytes | None) -> None:
    """Marker and container nodes carry no data (Kafka writes null or empty)."""
    return None


# ---------------------------------------------------------------- dispatch by path


@dataclass
class Decoded:
    """A znode payload decoded by path: ``value`` when it decodes, else ``error`` (raw kept)."""

    path: str
    kind: str | None
    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _decoder(kind: str, params: dict) -> Callable[[bytes | None], Any]:
    if kind == "broker":
        return lambda d: decode_broker(d, int(params["broker"]))
    if kind == "topic":
        return lambda d: decode_topic(d, params["topic"])
    if kind == "partition_state":
        return lambda d: decode_partition_state(
            d, f"/brokers/topics/{params['topic']}/partitions/{params['partition']}/state"
        )
    if kind == "entity_config":
        return lambda d: decode_entity_config(d, f"/config/{params['entity_type']}/{params['entity']}")
    if kind == "acls":
        return lambda d: decode_acls(d, f"acls for {params['resource_type']}:{params['resource']}")
    if kind == "preferred_replica_election":
        return lambda d: decode_partition_list(d, paths.PREFERRED_REPLICA_ELECTION)
    if kind == "isr_change":
        return lambda d: decode_partition_list(d, "isr change notification")
    if kind == "delegation_token":
        return lambda d: decode_delegation_token(d, f"/delegation_token/tokens/{params['token']}")
    if kind == "token_change":
        return lambda d: _text(d, "token change")
    return _SIMPLE[kind]


_SIMPLE: dict[str, Callable[[bytes | None], Any]] = {
    "cluster_id": decode_cluster_id,
    "controller": decode_controller,
    "controller_epoch": decode_controller_epoch,
    "reassign_partitions": decode_reassign_partitions,
    "log_dir_event": decode_log_dir_event,
    "config_change": decode_config_change,
    "acl_change": decode_acl_change,
    "extended_acl_change": decode_extended_acl_change,
    "producer_id_block": decode_producer_id_block,
    "feature": decode_feature,
    "migration": decode_migration,
    "consumer_offset": decode_consumer_offset,
    "empty": decode_empty,
}


def decode_path(path: str, data: bytes | None) -> Decoded:
    """Decode whatever Kafka keeps at ``path`` (chroot-relative); unknown paths give kind None."""
    pk = paths.classify(path)
    if pk is None:
        return Decoded(path, None)
    try:
        value = _decoder(pk.kind, pk.params)(data)
    except ZkPayloadError as exc:
        return Decoded(path, pk.kind, error=str(exc))
    return Decoded(path, pk.kind, value)
