"""Structured handler fuzz: requests that decode, with odd values, for every API and version a
real ``kafkatool serve`` advertises, seeded.  The counterpart of test_wire_fuzz, whose mutated
bytes mostly fail to decode and so rarely reach a handler.

Each request is built from the schema (tests/protocol/protocol_values.filled: a random value
in every field, one case in four) or field by field from the field's name, mixing the broker's
real state with odd values: real topics (their ids too), partitions 0..2 beside -1, 99 and
2**31-1, the real groups with their members and generations, transactional ids with their
producer id and epoch (one transaction left open, one committed), an idempotent producer, a
fetch session; and -1 ids, unknown topic ids, timestamps -1 to -5 and Long.MAX_VALUE, huge and
negative sizes, empty, null and duplicated arrays, record batches valid, legacy, control,
corrupt or garbage.  Destructive requests run too: the topics, the groups' members, the
producers' epochs are put back as they go, and a client quota is removed (``restore``).

The broker must log no handler failure ("handler failed") and no traceback, answer every
request with a response that decodes (a marker ApiVersions after each request on the same
connection shows a hang or a close), close a connection only where Kafka does (a Produce with
acks=0 that fails, whose error Kafka answers by closing), stay alive and serve afterwards.
Only JoinGroup and SyncGroup (a rebalance waits for the group's members) and a Fetch with a
long max wait may hold their answer; their connection is dropped after a short wait.  The
default run sends 6,000 requests (a few seconds); ``pytest -m slow tests/faults`` sends 100,000
(``FUZZ_CASES`` overrides either).  A failure names its seed and case: ``FUZZ_SEED=n``.

Left out on purpose: a JoinGroup naming one protocol twice.  Kafka's own GroupMetadata counts a
member's protocols as listed (incSupportedProtocols), so no protocol is supported by all
members and MemberMetadata.vote throws IllegalArgumentException when the join completes; the
same request fails in Kafka 3.7, so it is not a handler bug to find here."""

from __future__ import annotations

import os
import random
import socket
import struct
import time
import uuid

import pytest

from kafkatool.formats import records as R
from kafkatool.formats.schema import Message, in_range
from kafkatool.protocol import generated as G
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.framing import encode_request, parse_response
from kafkatool.protocol.generated.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from kafkatool.protocol.generated.create_topics_request import CreatableTopic, CreatableTopicConfig
from kafkatool.protocol.generated.join_group_request import JoinGroupRequestProtocol
from kafkatool.protocol.generated.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kafkatool.protocol.generated.offset_fetch_request import OffsetFetchRequestTopic
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData
from kafkatool.protocol.generated.sync_group_request import SyncGroupRequestAssignment
from tests.broker.conftest import BrokerProcess
from tests.broker.test_protocol import batch, fetch, fetch_req, produce
from tests.broker.wire import WireClient
from tests.protocol import protocol_values

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": INT32,
    "uint32": (0, 2**32 - 1),
    "int64": INT64,
}
MARKER_CORRELATION = 0x7EADBEEF
_MARKER = encode_request(
    18,
    3,
    MARKER_CORRELATION,
    "hfuzz",
    G.ApiVersionsRequest(client_software_name="f", client_software_version="1"),
)
#: (name, partitions, configs) of the topics the fuzz names
TOPICS = (("hf", 3, {}), ("hf1", 1, {}), ("hfc", 2, {"cleanup.policy": "compact"}))
TXN_IDS = ("hftx-open", "hftx-done")
CLASSIC, CONSUMER = "hfg", "hfcg"
#: JoinGroup, SyncGroup: held while the group rebalances (and a Fetch's long poll)
HOLDING_APIS = frozenset({11, 14})
HELD_WAIT_S = 0.2
ANSWER_WAIT_S = 5.0
#: after these the world is put back before the next request (49: a client quota set for
#: every client would throttle the rest of the run to a request a second)
DESTRUCTIVE_APIS = frozenset({13, 20, 42, 47, 49})
RESTORE_EVERY = 200
CONFIG_NAMES = (
    "cleanup.policy", "retention.ms", "min.insync.replicas", "segment.bytes", "max.message.bytes",
    "message.timestamp.type", "compression.type", "log.retention.ms", "log.cleaner.threads",
    "num.io.threads", "segment.ms", "retention.bytes", "message.timestamp.difference.max.ms",
    "unclean.leader.election.enable", "log.flush.interval.messages", "message.downconversion.enable",
    "local.retention.ms", "remote.storage.enable", "leader.replication.throttled.rate",
    "follower.replication.throttled.replicas", "sasl.enabled.mechanisms", "ssl.keystore.password",
)  # fmt: skip
CONFIG_VALUES = (
    "", "1", "-1", "0", "compact", "delete", "compact,delete", "x", "9999999999999999999", "1.5",
    "LogAppendTime", "gzip", "*", "0:1", "true", " ", "2147483648", "-9223372036854775808",
)  # fmt: skip


def now_ms() -> int:
    return int(time.time() * 1000)


class World:
    """The broker's real names and ids the fuzz mixes in, and the request being built's
    "persona": one transactional id with its producer id and epoch, one group with a member and
    its generation, so that the fields of one request agree with each other more often than by
    chance."""

    def __init__(self, log_dir: str):
        self.log_dir = log_dir
        self.topic_ids: list[uuid.UUID] = []
        self.producers: dict[str | None, tuple[int, int]] = {}  # txn id (None: idempotent) -> (pid, epoch)
        self.members: dict[str, tuple[str, int]] = {}  # group -> (member id, generation / member epoch)
        self.sessions: list[int] = []
        self.persona: dict = {}
        self.internal = True

    def choose_persona(self, rng: random.Random) -> None:
        p = self.persona = {}
        txn = rng.choice(sorted(self.producers, key=str))
        p["txn"], (p["pid"], p["epoch"]) = txn, self.producers[txn]
        group = rng.choice(sorted(self.members))
        p["group"], (p["member"], p["gen"]) = group, self.members[group]

    def mine(self, rng: random.Random, key: str, otherwise):
        """The persona's value most of the time, else ``otherwise(rng)``."""
        if key in self.persona and self.persona[key] is not None and rng.random() < 0.7:
            return self.persona[key]
        return otherwise(rng)


def pick(rng: random.Random, real, odd, p_real: float = 0.6):
    return rng.choice(real) if real and rng.random() < p_real else rng.choice(odd)


class Values:
    """A value for each field of a request, by the field's name (``None``: no opinion, a random
    one of its type is taken)."""

    def __init__(self, world: World):
        self.w = world
        w = world
        pids = lambda: [p for p, _ in w.producers.values()]  # noqa: E731
        epochs = lambda: [e for _, e in w.producers.values()]  # noqa: E731
        gens = lambda: [g for _, g in w.members.values()]  # noqa: E731
        self.ints = {
            "partitionIndex": self.partition,
            "partition": self.partition,
            "index": self.partition,
            "partitionIndexes": self.partition,
            "partitions": self.partition,
            "producerId": lambda r: w.mine(
                r, "pid", lambda r: pick(r, pids(), [-1, 0, 12345, INT64[1], INT64[0]])
            ),
            "v3AndBelowProducerId": lambda r: w.mine(r, "pid", lambda r: pick(r, pids(), [-1, 0, INT64[1]])),
            "producerEpoch": lambda r: w.mine(
                r, "epoch", lambda r: pick(r, epochs(), [-1, 0, 1, 32767, -32768])
            ),
            "v3AndBelowProducerEpoch": lambda r: w.mine(
                r, "epoch", lambda r: pick(r, epochs(), [-1, 0, 32767])
            ),
            "producerIdFilters": lambda r: pick(r, pids(), [-1, 0, INT64[1]]),
            "generationId": lambda r: w.mine(r, "gen", lambda r: pick(r, gens(), [-1, 0, INT32[1], -2])),
            "generationIdOrMemberEpoch": lambda r: w.mine(
                r, "gen", lambda r: pick(r, gens(), [-1, 0, INT32[1]])
            ),
            "memberEpoch": lambda r: w.mine(r, "gen", lambda r: r.choice([0, -1, -2, 1, 99, INT32[1]])),
            "timestamp": lambda r: r.choice([-1, -2, -3, -4, -5, 0, now_ms(), now_ms() - 3_600_000, *INT64]),
            "commitTimestamp": lambda r: r.choice([-1, 0, now_ms(), *INT64]),
            "retentionTimeMs": lambda r: r.choice([-1, 0, 1, *INT64]),
            "fetchOffset": lambda r: r.choice([0, 1, 3, 5, 100, -1, -2, *INT64]),
            "logStartOffset": lambda r: r.choice([-1, 0, 3, *INT64]),
            "committedOffset": lambda r: r.choice([-1, 0, 5, -2, *INT64]),
            "offset": lambda r: r.choice([-1, 0, 1, 3, 100, -2, *INT64]),
            "maxBytes": lambda r: r.choice([0, -1, 1, 100, 1 << 20, *INT32]),
            "minBytes": lambda r: r.choice([0, -1, 1, 1 << 20, INT32[0]]),
            "partitionMaxBytes": lambda r: r.choice([0, -1, 1, 100, *INT32]),
            # short: a long poll is not what is fuzzed here (a fetch that waits is held)
            "maxWaitMs": lambda r: r.choice([0, -1, 1, 10, INT32[0]]),
            "timeoutMs": lambda r: r.choice([0, -1, 100, 1000, *INT32]),
            "currentLeaderEpoch": lambda r: r.choice([-1, 0, 1, 5, -2, INT32[1]]),
            "leaderEpoch": lambda r: r.choice([-1, 0, 1, 5, -2, *INT32]),
            "lastFetchedEpoch": lambda r: r.choice([-1, 0, 1, 5, -2, INT32[1]]),
            "committedLeaderEpoch": lambda r: r.choice([-1, 0, 1, -2, INT32[1]]),
            "replicaId": lambda r: r.choice([-1, -1, 0, 1, -2, -3, INT32[1]]),  # 1: this broker
            "replicaEpoch": lambda r: r.choice([-1, 0, INT64[1]]),
            "isolationLevel": lambda r: r.choice([0, 1, 2, -1, 127, -128]),
            "acks": lambda r: r.choice([-1, 1, 1, 0, 2, -2, 32767]),
            "resourceType": lambda r: r.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 16, 32, -1, 99]),
            "resourceTypeFilter": lambda r: r.choice([0, 1, 2, 3, 4, 5, 6, 7, -1, 99]),
            "resourcePatternType": lambda r: r.choice([0, 1, 2, 3, 4, 5, -1]),
            "patternTypeFilter": lambda r: r.choice([0, 1, 2, 3, 4, 5, -1]),
            "operation": lambda r: r.randint(-1, 15),
            "permissionType": lambda r: r.choice([0, 1, 2, 3, 4, -1]),
            "configOperation": lambda r: r.choice([0, 1, 2, 3, -1, 4, 127]),
            "keyType": lambda r: r.choice([0, 1, 0, 1, 2, -1, 5]),
            "electionType": lambda r: r.choice([0, 1, 2, -1]),
            "endpointType": lambda r: r.choice([1, 2, 0, -1, 3]),
            "numPartitions": lambda r: r.choice([-1, 0, 1, 3, 100_001, *INT32]),
            "count": lambda r: r.choice([-1, 0, 1, 3, 4, 100_001, *INT32]),
            "replicationFactor": lambda r: r.choice([-1, 0, 1, 2, 32767, -32768]),
            "sessionTimeoutMs": lambda r: r.choice([6000, 10000, 30000, -1, 0, 10, INT32[1]]),
            # no long rebalance: a join waits for the group's other members that long
            "rebalanceTimeoutMs": lambda r: r.choice([-1, 0, 10, 60, 1000]),
            "sessionId": lambda r: pick(r, w.sessions + [0], [-1, 1, *INT32]),
            "sessionEpoch": lambda r: r.choice([-1, 0, 1, 2, -2, *INT32]),
            "transactionTimeoutMs": lambda r: r.choice([-1, 0, 1, 60000, 900_001, INT32[1]]),
            "coordinatorEpoch": lambda r: r.choice([-1, 0, 1, INT32[1]]),
            "maxNumOffsets": lambda r: r.choice([-1, 0, 1, INT32[1]]),
            "responsePartitionLimit": lambda r: r.choice([0, -1, 1, 2, *INT32]),
            "durationFilter": lambda r: r.choice([-1, 0, 1, *INT64]),
            "matchType": lambda r: r.choice([0, 1, 2, -1, 5]),
            "mechanism": lambda r: r.choice([0, 1, 2, -1, 5]),
            "iterations": lambda r: r.choice([-1, 0, 4096, 4095, 16384, 16385, INT32[1]]),
            "maxLifetimeMs": lambda r: r.choice([-1, 0, 1, *INT64]),
            "renewPeriodMs": lambda r: r.choice([-1, 0, 1, *INT64]),
            "expiryTimePeriodMs": lambda r: r.choice([-1, 0, 1, *INT64]),
            "brokerIds": lambda r: r.choice([1, 1, 0, -1, INT32[1]]),
            "replicas": lambda r: r.choice([1, 1, 0, -1, INT32[1]]),
        }

    # ------------------------------------------------------------------ names
    def topic(self, rng: random.Random) -> str:
        real = [t for t, _, _ in TOPICS] + (["__consumer_offsets"] if self.w.internal else [])
        odd = ["", "nope", "a" * 250, "a/b", ".", "..", "hf ", "x" * 300]
        if self.w.internal:
            odd.append("__transaction_state")
        return pick(rng, real, odd, 0.8)

    def partition(self, rng: random.Random) -> int:
        return pick(rng, [0, 0, 1, 2], [-1, -2, 3, 99, *INT32], 0.8)

    def string(self, rng: random.Random, name: str, struct: str, nullable: bool):
        w = self.w
        null = [None] if nullable else []
        if name in ("name", "topic", "topicName") and not any(
            s in struct for s in ("Config", "Protocol", "User", "Scram")
        ):
            return self.topic(rng)
        if name == "name" and "Config" in struct:
            return pick(rng, CONFIG_NAMES, ["", "nope", "a.b", *null])
        if name == "name" and "Protocol" in struct:
            return pick(rng, ["range", "roundrobin", "cooperative-sticky", "uniform"], ["", "x", "a" * 300])
        if name == "name":
            return pick(rng, ["alice", "bob", "User:alice"], ["", "x" * 300, "User:"])
        if name == "value":
            return pick(rng, CONFIG_VALUES, [None])
        if name == "groupId":
            return w.mine(rng, "group", lambda r: pick(r, [CLASSIC, CONSUMER], ["", "nope", "a" * 300]))
        if name == "key":
            if "OpData" in struct:  # a client quota
                real = ["producer_byte_rate", "consumer_byte_rate", "request_percentage"]
                return pick(
                    rng, real + ["controller_mutation_rate", "connection_creation_rate"], ["", "nope"]
                )
            return pick(rng, [CLASSIC, CONSUMER, *TXN_IDS], ["", "nope"])
        if name == "memberId":
            members = [m for m, _ in w.members.values()]
            return w.mine(rng, "member", lambda r: pick(r, members, ["", "x", f"c-{uuid.uuid4()}"]))
        if name in ("groupInstanceId", "instanceId"):
            return pick(rng, null or ["i"], ["", "inst", "inst2"])
        if name in ("transactionalId", "v3AndBelowTransactionalId"):
            return w.mine(rng, "txn", lambda r: pick(r, [*TXN_IDS, *null], ["", "nope", "a" * 300]))
        if name == "protocolType":
            return pick(rng, ["consumer", "connect"], ["", "x", *null])
        if name == "protocolName":
            return pick(rng, ["range", "roundrobin"], ["", "x", *null])
        if name == "committedMetadata":
            return pick(rng, ["", "m"], ["x" * 5000, *null])  # offset.metadata.max.bytes: 4096
        if name in ("resourceName", "resourceNameFilter"):
            real = [t for t, _, _ in TOPICS] + ["1", CLASSIC, TXN_IDS[0], "*", ""]
            return pick(rng, real, ["nope", "0", "-1", "a" * 300, *null])
        if name in ("principal", "principalFilter"):
            return pick(rng, ["User:alice", "User:*"], ["", "nope", "User:", ":x", "Group:a", *null])
        if name in ("host", "hostFilter"):
            return pick(rng, ["*", "127.0.0.1"], ["", "nope", "::1", *null])
        if name == "entityType":
            return pick(rng, ["user", "client-id", "ip"], ["", "nope", "USER"])
        if name in ("entityName", "match"):
            return pick(rng, ["alice", "c1", "127.0.0.1", *null], ["", "nope", "999.1.1.1", "<default>"])
        if name == "path":
            return pick(rng, [w.log_dir], ["", "/nonexistent", "relative", w.log_dir + "/"])
        if name in ("principalType", "ownerPrincipalType"):
            return pick(rng, ["User"], ["", "Group", "nope", *null])
        if name in ("principalName", "ownerPrincipalName"):
            return pick(rng, ["alice"], ["", "*", *null])
        if name == "serverAssignor":
            return pick(rng, ["uniform", "range", *null], ["nope", ""])
        if name == "subscribedTopicRegex":
            return pick(rng, ["hf.*", *null], ["[", "", "(a", ".*"])
        if name == "rackId":
            return pick(rng, ["", "r1", *null], ["x" * 300])
        if name == "mechanism":
            return pick(rng, ["PLAIN", "SCRAM-SHA-256"], ["", "nope"])
        if name == "reason":
            return pick(rng, null or [""], ["", "r" * 500])
        return None

    def element(self, rng: random.Random, name: str, elem: str):
        """An element of an array of scalars."""
        if elem == "string":
            if name in ("topicNames", "subscribedTopicNames", "topics"):
                return self.topic(rng)
            if name in ("groups", "groupsNames", "groupIds", "coordinatorKeys"):
                return pick(rng, [CLASSIC, CONSUMER, *TXN_IDS], ["", "nope"])
            if name == "transactionalIds":
                return pick(rng, list(TXN_IDS), ["", "nope"])
            if name == "configurationKeys":
                return pick(rng, CONFIG_NAMES, ["", "nope"])
            if name in ("statesFilter", "stateFilters"):
                real = ["Stable", "Empty", "Ongoing", "CompleteCommit", "PreparingRebalance", "Dead"]
                return pick(rng, real, ["", "nope", "stable"])
            if name == "typesFilter":
                return pick(rng, ["consumer", "classic"], ["", "nope", "CLASSIC"])
        rule = self.ints.get(name)
        if rule is not None:
            return rule(rng)
        return protocol_values._scalar(elem, None, rng, False)

    # ------------------------------------------------------------------ bytes
    def records(self, rng: random.Random) -> bytes:
        w = self.w
        n = rng.choice([1, 2, 3])
        ts = rng.choice([None, None, -1, 0, 2**62, -5])
        recs = [
            R.SimpleRecord(
                b"v%d" % i, rng.choice([b"k", None, b""]), [], (now_ms() if ts is None else ts) + i
            )
            for i in range(n)
        ]
        pids = [p for p, _ in w.producers.values()]
        epochs = [e for _, e in w.producers.values()]
        pid = w.mine(rng, "pid", lambda r: pick(r, pids, [-1, 0, 12345, INT64[1]], 0.5))
        epoch = w.mine(rng, "epoch", lambda r: pick(r, epochs, [-1, 0, 32767], 0.5))
        kind = rng.randrange(10)
        if kind < 5:
            return R.build_record_batch(
                recs,
                codec=rng.choice([0, 0, 1, 2, 3, 4]),
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=rng.choice([-1, 0, 1, 5, 2**31 - 1]),
                is_transactional=rng.random() < 0.3,
                base_offset=rng.choice([0, 0, 5, -1]),
                partition_leader_epoch=rng.choice([-1, 0, 5]),
            )
        if kind == 5:
            return R.build_legacy_message_set(recs, magic=rng.choice([0, 1]), codec=rng.choice([0, 1, 2, 3]))
        if kind == 6:
            return R.build_control_batch(rng.choice([0, 1, 5]), producer_id=pid, producer_epoch=epoch)
        if kind == 7:  # one byte off: a CRC or a length that lies
            b = bytearray(R.build_record_batch(recs))
            b[rng.randrange(len(b))] ^= 0xFF
            return bytes(b)
        if kind == 8:
            return rng.choice([b"", rng.randbytes(rng.randrange(1, 80))])
        return R.build_record_batch(recs) * 2

    def subscription(self, rng: random.Random) -> bytes:
        """JoinGroup metadata: a ConsumerProtocolSubscription, often, or garbage."""
        if rng.random() < 0.3:
            return rng.choice([b"", rng.randbytes(rng.randrange(1, 40))])
        topics = [self.topic(rng).encode() for _ in range(rng.randint(0, 2))]
        out = struct.pack(">hi", rng.choice([0, 1, 3, -1]), len(topics))
        for t in topics:
            out += struct.pack(">h", len(t)) + t
        return out + struct.pack(">i", -1)

    def assignment(self, rng: random.Random) -> bytes:
        """SyncGroup assignment: a ConsumerProtocolAssignment, often, or garbage."""
        if rng.random() < 0.3:
            return rng.choice([b"", rng.randbytes(rng.randrange(1, 40))])
        t = self.topic(rng).encode()
        out = struct.pack(">hih", rng.choice([0, 1, -1]), 1, len(t)) + t
        return out + struct.pack(">iii", 1, self.partition(rng), -1)

    # ------------------------------------------------------------------ fields
    def field(self, f, version: int, rng: random.Random, depth: int, struct_name: str):
        nullable = in_range(version, f.nullable)
        name = f.json_name
        if f.kind == "struct":
            if nullable and rng.random() < 0.3:
                return None
            return self.message(f.cls, version, rng, depth + 1)
        if f.kind == "array":
            r = rng.random()
            if nullable and r < 0.12:
                return None
            if r < 0.22:
                return []
            n = rng.choice([1, 1, 1, 2, 3])
            if f.elem == "struct":
                items = [self.message(f.cls, version, rng, depth + 1) for _ in range(n)]
            else:
                items = [self.element(rng, name, f.elem) for _ in range(n)]
            if rng.random() < 0.15:
                items.append(items[0])  # a duplicate
            return items
        if f.kind == "records":
            return None if nullable and rng.random() < 0.1 else self.records(rng)
        if rng.random() < 0.08:  # now and then any value of the type
            return protocol_values._scalar(f.kind, f.default_value(), rng, nullable)
        if f.kind == "string":
            v = self.string(rng, name, struct_name, nullable)
            if v is None and (not nullable or rng.random() < 0.5):
                v = protocol_values._scalar("string", f.default_value(), rng, False)
            return v
        if f.kind in _RANGES:
            lo, hi = _RANGES[f.kind]
            rule = self.ints.get(name)
            if rule is not None:
                v = rule(rng)
                if lo <= v <= hi:
                    return v
            return rng.choice([0, 1, -1 if lo < 0 else 2, lo, hi])
        if f.kind == "bool":
            return rng.random() < 0.5
        if f.kind == "float64":
            return rng.choice([1.5, 0.0, -1.0, 1e300, float("inf"), float("-inf"), float("nan"), 2.0**63])
        if f.kind == "uuid":
            return pick(
                rng,
                self.w.topic_ids,
                [uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128)), uuid.UUID(int=1)],
            )
        if f.kind == "bytes":
            if name == "metadata":
                return self.subscription(rng)
            if name == "assignment":
                return self.assignment(rng)
            if nullable and rng.random() < 0.2:
                return None
            return rng.choice([b"", rng.randbytes(rng.randrange(1, 64)), b"\x00" * 32])
        return protocol_values._scalar(f.kind, f.default_value(), rng, nullable)

    def message(self, cls: type[Message], version: int, rng: random.Random, depth: int = 0) -> Message:
        obj = cls()
        for f in cls._FIELDS:
            tagged = in_range(version, f.tagged)
            if not (in_range(version, f.versions) or tagged) or (tagged and rng.random() < 0.5):
                continue
            setattr(obj, f.attr, self.field(f, version, rng, depth, cls.__name__))
        return obj

    def request(self, key: int, version: int, rng: random.Random) -> Message:
        cls = API_BY_KEY[key].request
        self.w.choose_persona(rng)
        # deleting an internal topic is allowed (as in Kafka) but leaves a coordinator without
        # its log for the rest of the run: the deletions name the fuzz's own topics
        self.w.internal = key != 20
        body = (
            protocol_values.filled(cls, version, rng)
            if rng.random() < 0.25
            else self.message(cls, version, rng)
        )
        if key == 11 and body.protocols:  # see the module's docstring
            seen: set[str] = set()
            body.protocols = [p for p in body.protocols if not (p.name in seen or seen.add(p.name))]
        return body


# ---------------------------------------------------------------------- the broker's state


def _join_classic(c: WireClient, world: World, values: Values) -> None:
    """A member of the classic group (its session outlives the run; a rebalance it does not
    rejoin drops it after a second, and ``restore`` brings one back)."""
    proto = [JoinGroupRequestProtocol(name="range", metadata=values.subscription(random.Random(1)))]

    def join(member_id: str):
        req = G.JoinGroupRequest(
            group_id=CLASSIC,
            session_timeout_ms=600_000,
            rebalance_timeout_ms=1000,
            member_id=member_id,
            protocol_type="consumer",
            protocols=proto,
        )
        return c.request(11, 5, req)

    j = join(join("").member_id)
    if j.error_code != 0:
        return
    assignment = values.assignment(random.Random(2))
    c.request(
        14,
        3,
        G.SyncGroupRequest(
            group_id=CLASSIC,
            generation_id=j.generation_id,
            member_id=j.member_id,
            assignments=[SyncGroupRequestAssignment(member_id=j.member_id, assignment=assignment)],
        ),
    )
    world.members[CLASSIC] = (j.member_id, j.generation_id)


def _heartbeat_consumer(c: WireClient, world: World) -> None:
    """A member of the KIP-848 group: its heartbeat, or a new member when it was fenced."""
    member, epoch = world.members.get(CONSUMER, ("", 0))
    req = G.ConsumerGroupHeartbeatRequest(
        group_id=CONSUMER,
        member_id=member,
        member_epoch=epoch,
        rebalance_timeout_ms=-1,
        subscribed_topic_names=None,
        server_assignor=None,
        topic_partitions=None,
    )
    h = c.request(68, 0, req) if member else None
    if h is None or h.error_code != 0:
        join = G.ConsumerGroupHeartbeatRequest(
            group_id=CONSUMER,
            member_id="",
            member_epoch=0,
            rebalance_timeout_ms=60_000,
            subscribed_topic_names=["hf", "hf1"],
            server_assignor=None,
            topic_partitions=[],
        )
        h = c.request(68, 0, join)
    if h.error_code == 0:
        world.members[CONSUMER] = (h.member_id, h.member_epoch)


def _create_missing_topics(c: WireClient, world: World) -> None:
    md = c.request(3, 12, G.MetadataRequest(topics=None))
    have = {t.name for t in md.topics}
    missing = [t for t in TOPICS if t[0] not in have]
    if missing:
        topics = [
            CreatableTopic(
                name=name,
                num_partitions=n,
                replication_factor=1,
                assignments=[],
                configs=[CreatableTopicConfig(name=k, value=v) for k, v in cfg.items()],
            )
            for name, n, cfg in missing
        ]
        c.request(19, 7, G.CreateTopicsRequest(topics=topics, timeout_ms=5000))
        for name, n, _ in missing:
            for p in range(n):
                produce(c, name, batch(3), partition=p)
        md = c.request(3, 12, G.MetadataRequest(topics=None))
    # the deleted topics' ids stay: an id that was real
    ids = [t.topic_id for t in md.topics if t.name in {n for n, _, _ in TOPICS}]
    world.topic_ids = ids + [i for i in world.topic_ids if i not in ids][:6]


def setup(b: BrokerProcess, world: World, values: Values) -> None:
    """Topics with data, an idempotent producer, a transaction left open and one committed
    (both over hf-0/1 and a group's offsets), a classic group with its member and an offset,
    a KIP-848 group's member, a fetch session."""
    with WireClient(b.bootstrap) as c:
        _create_missing_topics(c, world)
        init = G.InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1
        )
        r = c.request(22, 4, init)
        world.producers[None] = (r.producer_id, r.producer_epoch)
        assert produce(c, "hf", batch(2, pid=r.producer_id, epoch=r.producer_epoch, seq=0)).error_code == 0
        for tx in TXN_IDS:
            c.request(10, 4, G.FindCoordinatorRequest(key_type=1, coordinator_keys=[tx]))
            init = G.InitProducerIdRequest(
                transactional_id=tx, transaction_timeout_ms=600_000, producer_id=-1, producer_epoch=-1
            )
            r = c.request(22, 4, init)
            assert r.error_code == 0, r
            pid, epoch = r.producer_id, r.producer_epoch
            world.producers[tx] = (pid, epoch)
            add = G.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=tx,
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[AddPartitionsToTxnTopic(name="hf", partitions=[0, 1])],
            )
            c.request(24, 3, add)
            data = R.build_record_batch(
                [R.SimpleRecord(b"t", b"k", [], now_ms())],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=0,
                is_transactional=True,
            )
            req = G.ProduceRequest(
                transactional_id=tx,
                acks=-1,
                timeout_ms=5000,
                topic_data=[
                    TopicProduceData(name="hf", partition_data=[PartitionProduceData(index=0, records=data)])
                ],
            )
            assert c.request(0, 9, req).responses[0].partition_responses[0].error_code == 0
            c.request(
                25,
                3,
                G.AddOffsetsToTxnRequest(
                    transactional_id=tx, producer_id=pid, producer_epoch=epoch, group_id=CLASSIC
                ),
            )
            if tx == TXN_IDS[1]:
                end = G.EndTxnRequest(
                    transactional_id=tx, producer_id=pid, producer_epoch=epoch, committed=True
                )
                assert c.request(26, 3, end).error_code == 0
        _join_classic(c, world, values)
        member, generation = world.members[CLASSIC]
        commit = G.OffsetCommitRequest(
            group_id=CLASSIC,
            generation_id_or_member_epoch=generation,
            member_id=member,
            topics=[
                OffsetCommitRequestTopic(
                    name="hf",
                    partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=2)],
                )
            ],
        )
        c.request(8, 8, commit)
        _heartbeat_consumer(c, world)
        f = fetch(c, "hf", 0, epoch=0)
        if f.session_id:
            world.sessions.append(f.session_id)


def restore(b: BrokerProcess, world: World, values: Values) -> None:
    """The topics again (a DeleteTopics may have taken them), the producers' current epochs
    (an InitProducerId bumps them), the groups' members (a LeaveGroup, a DeleteGroups or a
    rebalance may have removed them); no client quota."""
    with WireClient(b.bootstrap, timeout=10) as c:
        _remove_client_quotas(c)
    with WireClient(b.bootstrap, timeout=10) as c:
        _create_missing_topics(c, world)
        d = c.request(65, 0, G.DescribeTransactionsRequest(transactional_ids=list(TXN_IDS)))
        for ts in d.transaction_states:
            if ts.error_code == 0 and ts.producer_id >= 0:
                world.producers[ts.transactional_id] = (ts.producer_id, ts.producer_epoch)
        g = c.request(15, 5, G.DescribeGroupsRequest(groups=[CLASSIC])).groups[0]
        # a group some member of the fuzz's holds is left to it (a join would wait for its rebalance)
        if world.members[CLASSIC][0] not in {m.member_id for m in g.members} and g.group_state in (
            "Empty",
            "Dead",
        ):
            _join_classic(c, world, values)
    with WireClient(b.bootstrap, timeout=10) as c:
        _heartbeat_consumer(c, world)


def _remove_client_quotas(c: WireClient) -> None:
    from kafkatool.protocol.generated.alter_client_quotas_request import EntityData, EntryData, OpData

    entries = c.request(48, 1, G.DescribeClientQuotasRequest(components=[], strict=False)).entries or []
    if entries:
        remove = [
            EntryData(
                entity=[
                    EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity
                ],
                ops=[OpData(key=v.key, value=0.0, remove=True) for v in entry.values],
            )
            for entry in entries
        ]
        c.request(49, 1, G.AlterClientQuotasRequest(entries=remove, validate_only=False))


# ---------------------------------------------------------------------- the run


def _frames_until_marker(sock: socket.socket, deadline: float) -> tuple[str, list[bytes]]:
    """('answered', the frames before the marker's answer), or ('closed' | 'pending', ...)."""
    buf = b""
    frames: list[bytes] = []
    while time.monotonic() < deadline:
        try:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            break
        except (ConnectionResetError, BrokenPipeError):
            return "closed", frames
        if not chunk:
            return "closed", frames
        buf += chunk
        while len(buf) >= 4:
            (size,) = struct.unpack_from(">i", buf)
            if len(buf) < 4 + size:
                break
            frame, buf = buf[4 : 4 + size], buf[4 + size :]
            if struct.unpack_from(">i", frame)[0] == MARKER_CORRELATION:
                return "answered", frames
            frames.append(frame)
    return "pending", frames


def _failures(text: str) -> list[str]:
    """The broker log's handler failures and tracebacks, with the lines after them."""
    lines = text.splitlines()
    return [
        "\n".join(lines[i : i + 40])
        for i, line in enumerate(lines)
        if "handler failed" in line or line.startswith("Traceback")
    ]


def run_fuzz(b: BrokerProcess, n: int, seed: int) -> dict[str, int]:
    world = World(str(b.data_dir))
    values = Values(world)
    setup(b, world, values)
    with WireClient(b.bootstrap) as c:
        served = [
            (k.api_key, v) for k in c.api_versions().api_keys for v in range(k.min_version, k.max_version + 1)
        ]
    counts = {"answered": 0, "held": 0, "closed": 0, "unencodable": 0}
    sock = None
    log_at = len(b.log_text())
    restore_next = False
    try:
        for i in range(n):
            if restore_next or i % RESTORE_EVERY == 0:
                restore(b, world, values)
                restore_next = False
            rng = random.Random(f"{seed}:{i}")
            key, version = rng.choice(served)
            name = API_BY_KEY[key].name
            case = f"FUZZ_SEED={seed} case {i}: {name} v{version}"
            body = values.request(key, version, rng)
            try:
                frame = encode_request(key, version, i, "hfuzz", body)
            except Exception:  # a value this version cannot carry (a null in a field not nullable yet)
                counts["unencodable"] += 1
                continue
            if sock is None:
                sock = socket.create_connection(("127.0.0.1", b.port), timeout=5)
            sock.sendall(frame + _MARKER)
            held = key in HOLDING_APIS or (key == 1 and body.max_wait_ms >= ANSWER_WAIT_S * 1000)
            outcome, frames = _frames_until_marker(
                sock, time.monotonic() + (HELD_WAIT_S if held else ANSWER_WAIT_S)
            )
            text = b.log_text()
            failures = _failures(text[log_at:])
            log_at = len(text)
            assert not failures, f"{case}: {body!r}\n" + "\n".join(failures)[:6000]
            no_answer = key == 0 and body.acks == 0
            if outcome == "closed":
                # Kafka closes the connection of a Produce with acks=0 that fails
                assert no_answer, f"{case}: the connection was closed\n{body!r}"
            else:
                assert outcome == "answered" or held, f"{case}: no answer in {ANSWER_WAIT_S}s\n{body!r}"
            for got in frames:
                corr, _ = parse_response(got, key, version)  # the answer decodes
                assert corr == i, f"{case}: an answer for correlation id {corr}"
            if outcome == "answered":
                assert len(frames) == (0 if no_answer else 1), f"{case}: {len(frames)} answers\n{body!r}"
            counts[outcome if outcome != "pending" else "held"] += 1
            if outcome != "answered":
                sock.close()
                sock = None
            restore_next = key in DESTRUCTIVE_APIS
            if i % 250 == 0:
                assert b.alive(), f"{case}: the broker died\n{b.log_text()[-4000:]}"
    finally:
        if sock is not None:
            sock.close()
    return counts


def _serves(b: BrokerProcess) -> None:
    """After the fuzz: a new topic takes records and gives them back, a new group's member
    joins, commits and reads its offset."""
    from tests.broker.test_protocol import create_topic

    with WireClient(b.bootstrap, timeout=10) as c:
        assert c.api_versions().error_code == 0
        create_topic(c, "after-hfuzz", 2)
        assert produce(c, "after-hfuzz", batch(5), partition=1).error_code == 0
        f = c.request(1, 12, fetch_req("after-hfuzz", 0, partition=1))
        assert (
            f.responses[0].partitions[0].error_code == 0 and f.responses[0].partitions[0].high_watermark == 5
        )
        req = G.JoinGroupRequest(
            group_id="after-hfuzz",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=1000,
            member_id="",
            protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")],
        )
        j = c.request(11, 3, req)
        assert j.error_code == 0, j
        sync = G.SyncGroupRequest(
            group_id="after-hfuzz", generation_id=j.generation_id, member_id=j.member_id, assignments=[]
        )
        assert c.request(14, 3, sync).error_code == 0
        commit = G.OffsetCommitRequest(
            group_id="after-hfuzz",
            generation_id_or_member_epoch=j.generation_id,
            member_id=j.member_id,
            topics=[
                OffsetCommitRequestTopic(
                    name="after-hfuzz",
                    partitions=[OffsetCommitRequestPartition(partition_index=1, committed_offset=4)],
                )
            ],
        )
        assert c.request(8, 8, commit).topics[0].partitions[0].error_code == 0
        got = c.request(
            9,
            5,
            G.OffsetFetchRequest(
                group_id="after-hfuzz",
                topics=[OffsetFetchRequestTopic(name="after-hfuzz", partition_indexes=[1])],
            ),
        )
        assert got.error_code == 0 and got.topics[0].partitions[0].committed_offset == 4


def _check(b: BrokerProcess, counts: dict, seed: int, n: int) -> None:
    assert b.alive(), f"FUZZ_SEED={seed}: the broker died\n{b.log_text()[-4000:]}"
    _serves(b)
    failures = _failures(b.log_text())
    assert not failures, f"FUZZ_SEED={seed}:\n" + "\n".join(failures)[:6000]
    # most requests are sent and answered (a few values fit no version; a few joins wait)
    assert counts["answered"] > 0.8 * n, counts


@pytest.fixture
def fuzz_broker(tmp_path):
    b = BrokerProcess(
        tmp_path / "data",
        extra=[
            "num.partitions=1",
            "group.initial.rebalance.delay.ms=0",
            "offsets.topic.num.partitions=4",
            "transaction.state.log.num.partitions=4",
        ],
    ).start()
    yield b
    b.kill()


def test_handler_fuzz(fuzz_broker):
    seed = int(os.environ.get("FUZZ_SEED", "26"))
    n = int(os.environ.get("FUZZ_CASES", "6000"))
    _check(fuzz_broker, run_fuzz(fuzz_broker, n, seed), seed, n)


@pytest.mark.slow
def test_handler_fuzz_slow(fuzz_broker):
    seed = int(os.environ.get("FUZZ_SEED", "2600"))
    n = int(os.environ.get("FUZZ_CASES", "100000"))
    _check(fuzz_broker, run_fuzz(fuzz_broker, n, seed), seed, n)


def test_the_fuzz_reaches_the_handlers():
    """The structured requests decode as the broker decodes them (the wire fuzz's seldom do)
    and name the real state: a sample of them carries the world's names and ids."""
    from kafkatool.protocol.framing import parse_request

    world = World("/tmp/x")
    world.topic_ids = [uuid.UUID(int=7)]
    world.producers = {None: (3, 0), TXN_IDS[0]: (4, 2)}
    world.members = {CLASSIC: ("m-1", 1)}
    values = Values(world)
    rng = random.Random(5)
    decoded = real = 0
    for i in range(400):
        key = rng.choice([0, 1, 2, 8, 24, 26, 28])
        version = rng.randint(API_BY_KEY[key].min_version, API_BY_KEY[key].max_version)
        body = values.request(key, version, rng)
        try:
            frame = encode_request(key, version, i, "t", body)
        except Exception:
            continue
        header, back = parse_request(frame[4:])
        decoded += header.api_key == key
        text = repr(back)
        real += any(
            s in text
            for s in (
                "'hf'",
                "'hf1'",
                "'hfc'",
                "'m-1'",
                TXN_IDS[0],
                "UUID('00000000-0000-0000-0000-000000000007')",
            )
        )
    assert decoded > 350 and real > decoded // 2, (decoded, real)
