"""kafkatool metadata-shell: a KRaft __cluster_metadata-0 dir (snapshot + log) built from the
generated record codecs, replayed into Kafka's image and browsed with Kafka 3.7's shell commands."""

from __future__ import annotations

import io
import json
import struct
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.formats import records as R
from kafkatool.formats.generated.access_control_entry_record import AccessControlEntryRecord
from kafkatool.formats.generated.client_quota_record import ClientQuotaRecord, EntityData
from kafkatool.formats.generated.config_record import ConfigRecord
from kafkatool.formats.generated.feature_level_record import FeatureLevelRecord
from kafkatool.formats.generated.fence_broker_record import FenceBrokerRecord
from kafkatool.formats.generated.partition_change_record import PartitionChangeRecord
from kafkatool.formats.generated.partition_record import PartitionRecord
from kafkatool.formats.generated.producer_ids_record import ProducerIdsRecord
from kafkatool.formats.generated.register_broker_record import (
    BrokerEndpoint,
    BrokerFeature,
    RegisterBrokerRecord,
)
from kafkatool.formats.generated.remove_topic_record import RemoveTopicRecord
from kafkatool.formats.generated.topic_record import TopicRecord
from kafkatool.formats.generated.user_scram_credential_record import UserScramCredentialRecord
from kafkatool.formats.metadata_image import MetadataImage
from kafkatool.formats.uuid import uuid_bytes_to_string
from kafkatool.log import topic_settings as ts
from kafkatool.log.metadata_log import load_directory

FOO = uuid.UUID(int=0x1111_2222_3333_4444_5555_6666_7777_8888)
BAR = uuid.UUID(int=0x9999_AAAA_BBBB_CCCC_DDDD_EEEE_FFFF_0001)
GHOST = uuid.UUID(int=7)
DIR1 = uuid.UUID(int=0x0102_0304_0506_0708_090A_0B0C_0D0E_0F10)
INCARNATION = uuid.UUID(int=0xABCDEF)
ACL = uuid.UUID(int=0x42)
FOO_ID, BAR_ID = uuid_bytes_to_string(FOO.bytes), uuid_bytes_to_string(BAR.bytes)
DIR1_ID = uuid_bytes_to_string(DIR1.bytes)
T0 = 1_700_000_000_000


def rec(msg, version: int | None = None) -> bytes:
    """A metadata record value: frame version 1, api key, version, the body."""
    v = type(msg).VALID_VERSIONS[1] if version is None else version
    return bytes([1, type(msg).API_KEY, v]) + msg.encode(v)


def batch(values: list[bytes], base: int, ts: int = T0, epoch: int = 1) -> bytes:
    return R.build_record_batch(
        [R.SimpleRecord(v, None, (), ts) for v in values], base_offset=base, partition_leader_epoch=epoch
    )


def broker(bid: int, epoch: int, fenced: bool) -> bytes:
    return rec(
        RegisterBrokerRecord(
            broker_id=bid,
            incarnation_id=INCARNATION,
            broker_epoch=epoch,
            end_points=[
                BrokerEndpoint(name="PLAINTEXT", host="localhost", port=9092 + bid, security_protocol=0)
            ],
            features=[
                BrokerFeature(name="metadata.version", min_supported_version=1, max_supported_version=19)
            ],
            rack="r1" if bid == 1 else None,
            fenced=fenced,
            log_dirs=[DIR1] if bid == 1 else [],
        )
    )


def partition(topic: uuid.UUID, pid: int, replicas: list[int], leader: int) -> bytes:
    return rec(
        PartitionRecord(
            partition_id=pid,
            topic_id=topic,
            replicas=replicas,
            isr=list(replicas),
            leader=leader,
            leader_epoch=0,
            partition_epoch=0,
            directories=[DIR1] + [uuid.UUID(int=0)] * (len(replicas) - 1),
        )
    )


def config(rtype: int, name: str, key: str, value: str | None) -> bytes:
    return rec(ConfigRecord(resource_type=rtype, resource_name=name, name=key, value=value))


SNAPSHOT_RECORDS = [
    rec(FeatureLevelRecord(name="metadata.version", feature_level=19)),
    broker(1, 10, False),
    broker(2, 20, False),
    rec(TopicRecord(name="foo", topic_id=FOO)),
    partition(FOO, 0, [1, 2], 1),
    partition(FOO, 1, [2, 1], 2),
    rec(TopicRecord(name="bar", topic_id=BAR)),
    partition(BAR, 0, [1], 1),
    config(2, "foo", "retention.ms", "1000"),
    config(2, "foo", "cleanup.policy", "compact"),
    config(2, "bar", "segment.bytes", "1048576"),
    config(4, "", "log.retention.ms", "5000"),
    config(4, "1", "ssl.keystore.password", "hunter2"),
    rec(
        UserScramCredentialRecord(
            name="alice",
            mechanism=1,
            salt=b"salt",
            stored_key=b"stored",
            server_key=b"server",
            iterations=4096,
        )
    ),
    rec(ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=5000)),
    rec(
        AccessControlEntryRecord(
            id_=ACL,
            resource_type=2,
            resource_name="foo",
            pattern_type=3,
            principal="User:alice",
            host="*",
            operation=3,
            permission_type=3,
        )
    ),
    rec(
        ClientQuotaRecord(
            entity=[EntityData(entity_type="user", entity_name="alice")], key="producer_byte_rate", value=1e7
        )
    ),
]


def write_metadata_dir(mdir: Path, extra_batches: list[bytes] = ()) -> Path:
    """A __cluster_metadata-0 dir: snapshot 00..017-0000000001 (offsets 0-16 of the log), and the
    log from offset 0 (records before 17 are the snapshot's own history, not applied again)."""
    mdir.mkdir(parents=True)
    header = struct.pack(">hq", 0, T0 + 5) + b"\x00"
    snap = R.build_record_batch(
        [R.SimpleRecord(header, struct.pack(">hh", 0, R.SNAPSHOT_HEADER), (), T0)], is_control=True
    )
    snap += batch(SNAPSHOT_RECORDS, 0)
    (mdir / "00000000000000000017-0000000001.checkpoint").write_bytes(snap)
    log = batch([rec(TopicRecord(name="ghost", topic_id=GHOST))] * 17, 0)  # history the snapshot holds
    log += batch(
        [
            rec(PartitionChangeRecord(partition_id=0, topic_id=FOO, isr=[1])),  # ISR shrink, same leader
            rec(PartitionChangeRecord(partition_id=1, topic_id=FOO, leader=1)),  # a new leader
        ],
        17,
        T0 + 100,
        2,
    )
    log += batch([rec(RemoveTopicRecord(topic_id=BAR))], 19, T0 + 200, 2)
    log += batch([config(2, "foo", "retention.ms", None)], 20, T0 + 300, 2)
    log += batch([rec(FenceBrokerRecord(id_=2, epoch=20))], 21, T0 + 400, 2)
    for b in extra_batches:
        log += b
    (mdir / "00000000000000000000.log").write_bytes(log)
    return mdir


runner = CliRunner()


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def run(*args: str, stdin: str | None = None) -> Result:
    res = runner.invoke(app, ["metadata-shell", *args], input=stdin)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return Result(res.exit_code, res.stdout, res.stderr)


@pytest.fixture(scope="module")
def mdir(tmp_path_factory) -> Path:
    return write_metadata_dir(tmp_path_factory.mktemp("kraft") / "__cluster_metadata-0")


def test_replay_gives_kafkas_image(mdir):
    load = load_directory(mdir)
    assert load.damage is None and load.notes == [] and load.pending == 0
    im: MetadataImage = load.image
    assert set(im.topic_ids) == {"foo"}  # bar deleted, ghost before the snapshot
    foo = im.topics[FOO_ID]
    p0, p1 = foo.partitions[0], foo.partitions[1]
    assert (p0.isr, p0.leader, p0.leader_epoch, p0.partition_epoch) == ([1], 1, 0, 1)
    assert (p1.isr, p1.leader, p1.leader_epoch, p1.partition_epoch) == ([2, 1], 1, 1, 1)
    assert im.configs == {
        (2, "foo"): {"cleanup.policy": "compact"},
        (4, ""): {"log.retention.ms": "5000"},
        (4, "1"): {"ssl.keystore.password": "hunter2"},
    }
    assert (im.brokers[1].fenced, im.brokers[2].fenced) == (False, True)
    assert im.metadata_version == 19 and im.next_producer_id == 5000
    assert im.provenance == (21, 2, T0 + 400)


def test_read_kraft_takes_the_same_replay(mdir):
    layer = ts.read_kraft(mdir.parent, node_id=1)
    assert layer.topics == {"foo": {"cleanup.policy": "compact"}}
    assert layer.broker_default == {"log.retention.ms": "5000"}
    assert layer.broker_node == {"ssl.keystore.password": "hunter2"}
    snap = str(mdir / "00000000000000000017-0000000001.checkpoint")
    assert layer.origins[(ts.TOPIC_ORIGIN, "foo", "cleanup.policy")][:2] == (snap, 9)
    assert layer.notes == []


def test_one_command_cat_ls_tree_find(mdir):
    r = run("--directory", str(mdir), "cat", "/image/topics/byName/foo/1")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (
        f"PartitionRegistration(replicas=[2, 1], directories=[{DIR1_ID}, AAAAAAAAAAAAAAAAAAAAAA], "
        "isr=[2, 1], removingReplicas=[], addingReplicas=[], elr=[], lastKnownElr=[], leader=1, "
        "leaderRecoveryState=RECOVERED, leaderEpoch=1, partitionEpoch=1)\n"
    )
    r = run("-d", str(mdir.parent), "ls", "/image")
    assert r.stdout.splitlines() == [
        "acls", "clientQuotas", "cluster", "configs", "delegationToken", "features", "producerIds",
        "provenance", "scram", "topics",
    ]  # fmt: skip
    r = run("-d", str(mdir), "ls", "/image/topics/byName", "/image/cluster/brokers", "/image/provenance")
    assert r.stdout == "provenance\n\nbyName:\nfoo\n\nbrokers:\n1\n2\n"
    r = run(
        "-d",
        str(mdir),
        "cat",
        "/image/cluster/brokers/2",
        "/image/provenance",
        "/image/features/metadataVersion",
    )
    assert r.stdout.splitlines() == [
        f"BrokerRegistration(id=2, epoch=20, incarnationId={uuid_bytes_to_string(INCARNATION.bytes)}, "
        "listeners=[Endpoint(listenerName='PLAINTEXT', securityProtocol=PLAINTEXT, host='localhost', "
        "port=9094)], supportedFeatures={metadata.version: 1-19}, rack=Optional.empty, fenced=true, "
        "inControlledShutdown=false, isMigratingZkBroker=false, directories=[])",
        "offset 21, epoch 2, time 2023-11-14T22:13:20.4Z[UTC]",
        "3.7-IV4",
    ]
    r = run("-d", str(mdir), "tree", "/image/configs")
    assert r.stdout == (
        "BROKER:\n  log.retention.ms:\n    5000\n"
        "BROKER:1:\n  ssl.keystore.password:\n    [redacted]\n"
        "TOPIC:foo:\n  cleanup.policy:\n    compact\n"
    )
    r = run("-d", str(mdir), "find", "/image/topics")
    assert r.stdout.splitlines() == [
        "/image/topics", "/image/topics/byId", f"/image/topics/byId/{FOO_ID}",
        f"/image/topics/byId/{FOO_ID}/0", f"/image/topics/byId/{FOO_ID}/1", f"/image/topics/byId/{FOO_ID}/id",
        f"/image/topics/byId/{FOO_ID}/name", "/image/topics/byName", "/image/topics/byName/foo",
        "/image/topics/byName/foo/0", "/image/topics/byName/foo/1", "/image/topics/byName/foo/id",
        "/image/topics/byName/foo/name",
    ]  # fmt: skip
    r = run("-d", str(mdir), "cat", "/image/scram/SCRAM-SHA-256/alice", "/image/clientQuotas/user(alice)/*")
    assert r.stdout == (
        "ScramCredentialData(salt=[redacted], storedKey=[redacted], serverKey=[redacted], iterations=[redacted])\n"
        "1.0E7\n"
    )
    assert "hunter2" not in run("-d", str(mdir), "tree", "/").stdout


def test_globs_misses_and_unknown_commands(mdir):
    r = run("-d", str(mdir), "ls", "/image/topics/by*/*")
    assert r.returncode == 0 and r.stdout.splitlines()[:3] == [f"{FOO_ID}:", "0", "1"]
    r = run("-d", str(mdir), "cat", "/image/topics/byName/bar/0")
    assert (r.returncode, r.stdout) == (1, "cat: /image/topics/byName/bar/0: No such file or directory.\n")
    r = run("-d", str(mdir), "cat", "/image/topics")
    assert r.stdout == "cat: /image/topics: Is a directory\n"
    r = run("-d", str(mdir), "pwd")  # shell-only, as in Kafka's one-command mode
    assert r.returncode == 2 and "invalid choice: 'pwd'" in r.stderr and r.stdout == ""
    r = run("-d", str(mdir), "tre", "/")
    assert r.returncode == 2 and "did you mean 'tree'?" in r.stderr


def test_json(mdir):
    r = run("-d", str(mdir), "--json", "cat", "/image/topics/byName/foo/0", "/image/acls/*")
    part, acl = (json.loads(line) for line in r.stdout.splitlines())
    assert part == {
        "path": "/image/topics/byName/foo/0",
        "value": {
            "replicas": [1, 2], "directories": [DIR1_ID, "AAAAAAAAAAAAAAAAAAAAAA"], "isr": [1],
            "removingReplicas": [], "addingReplicas": [], "elr": [], "lastKnownElr": [], "leader": 1,
            "leaderRecoveryState": "RECOVERED", "leaderEpoch": 0, "partitionEpoch": 1,
        },
    }  # fmt: skip
    assert acl["value"] == {
        "resourceType": "TOPIC", "resourceName": "foo", "patternType": "LITERAL",
        "principal": "User:alice", "host": "*", "operation": "READ", "permissionType": "ALLOW",
    }  # fmt: skip
    (tree,) = (
        json.loads(line)
        for line in run("-d", str(mdir), "--json", "tree", "/image/cluster").stdout.splitlines()
    )
    assert tree["node"]["brokers"]["1"]["rack"] == "r1" and tree["node"]["brokers"]["2"]["fenced"] is True
    assert tree["node"]["brokers"]["1"]["directories"] == [DIR1_ID] and tree["node"]["controllers"] == {}


def test_snapshot_file_as_kafkas_dash_s(mdir):
    r = run("-s", str(mdir / "00000000000000000017-0000000001.checkpoint"), "ls", "/image/topics/byName")
    assert r.stdout == "bar\nfoo\n"
    r = run("-s", str(mdir / "00000000000000000017-0000000001.checkpoint"), "cat", "/image/provenance")
    assert r.stdout == "offset 16, epoch 1, time 2023-11-14T22:13:20Z[UTC]\n"  # SnapshotFileReader's batch


def test_interactive_shell_on_a_pipe(mdir):
    script = (
        "cd /image/topics/byName/foo\npwd\nls\ncd ..\ncd nothing\ncat name\n"
        + "x" * 70000
        + "\nhistory 2\nexit\nls\n"
    )
    r = run("-d", str(mdir), stdin=script)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "/image/topics/byName/foo", "0", "1", "id", "name", "cd: nothing: no such directory.",
        "cat: name: No such file or directory.", "line longer than 65536 characters: not run",
        "    5  cat name", "    6  history 2",
    ]  # fmt: skip


def test_truncated_log_reports_where_and_shows_the_image_up_to_there(tmp_path):
    extra = batch([rec(RemoveTopicRecord(topic_id=FOO))], 22, T0 + 500, 2)
    mdir = write_metadata_dir(tmp_path / "__cluster_metadata-0", [extra])
    log = mdir / "00000000000000000000.log"
    data = log.read_bytes()
    log.write_bytes(data[:-7])  # the last batch torn
    position = len(data) - len(extra)
    r = run("-d", str(mdir), "ls", "/image/topics/byName")
    assert r.returncode == 1 and r.stdout == "foo\n"
    assert r.stderr == (
        f"kafkatool: error: {log}: {len(extra) - 7} bytes at the end are not a whole batch (a torn write) "
        f"(byte position {position}); the image holds the records up to offset 21\n"
    )
    # a flipped byte inside a batch: its CRC, named with its offset
    broken = bytearray(data)
    broken[position + 70] ^= 0xFF
    log.write_bytes(bytes(broken))
    r = run("-d", str(mdir), "cat", "/image/provenance")
    assert r.returncode == 1 and r.stdout == "offset 21, epoch 2, time 2023-11-14T22:13:20.4Z[UTC]\n"
    assert r.stderr == (
        f"kafkatool: error: {log}: batch CRC does not match its bytes (offset 22, byte position {position}); "
        "the image holds the records up to offset 21\n"
    )


def test_refused_records_and_not_kafka_data(tmp_path):
    stray = batch([rec(PartitionChangeRecord(partition_id=0, topic_id=GHOST, isr=[1]))], 22, T0, 2)
    mdir = write_metadata_dir(tmp_path / "__cluster_metadata-0", [stray])
    r = run("-d", str(mdir), "ls", "/image/topics/byName")
    assert r.returncode == 1 and r.stdout == "foo\n"
    assert r.stderr.startswith(
        f"kafkatool: error: record skipped: {mdir / '00000000000000000000.log'}: offset 22 "
    )
    assert "Unable to find topic with id" in r.stderr
    junk = tmp_path / "junk.log"
    junk.write_bytes(b"\x00" * 8 + b"\xff\xff\xff\xff" + b"\x01" * 60)
    r = run("-s", str(junk), "ls")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not a KRaft metadata file" in r.stderr
    r = run("-s", str(tmp_path / "missing.checkpoint"), "ls")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    r = run("ls")
    assert r.returncode == 2 and "--snapshot FILE or --directory DIR" in r.stderr


def test_globs_and_ls_columns_as_kafkas_own_tests():
    """The expectations of Kafka 3.7's GlobComponentTest and LsCommandHandlerTest."""
    from kafkatool.forensics.metadata_shell import _column_schema, glob_regex, ls_lines

    assert [glob_regex(g) for g in ("blah", "", "does not need a regex, actually")] == [None, None, None]
    assert glob_regex("$blah*") == "^\\$blah.*$" and glob_regex("*") == "^.*$"
    assert glob_regex("foo{bar,baz}") == "^foo(?:(?:bar)|(?:baz))$"
    assert glob_regex("{a,{b}}") is None  # nested groups: taken literally
    assert _column_schema(None, ["abc", "def", "ghi"]) == ([0], 3)
    assert _column_schema(0, ["abc", "def"]) == ([0], 2)
    assert _column_schema(80, ["a", "abcdef", "beta"]) == ([3, 8, 6], 1)
    assert _column_schema(18, ["alphabet", "beta", "gamma", "theta", "zeta"]) == ([10, 7], 3)
    # Kafka pads every entry but the last column's; its test trims the whole output
    lines = ls_lines(["alphabet", "beta", "gamma", "theta", "zeta"], 18)
    assert "\n".join(lines).strip() == "alphabet  theta\nbeta      zeta\ngamma" and lines[2] == "gamma     "
    assert ls_lines(["foo", "foobarbaz", "quux"], 18) == ["foo        quux", "foobarbaz  "]


def _image(values: list[bytes]):
    """The image and the refusals of ``values`` fed through the codecs and the Replayer."""
    from kafkatool.formats.internal_topics import cluster_metadata_record_dict
    from kafkatool.formats.metadata_image import Replayer

    image = MetadataImage()
    replayer = Replayer(image)
    refused = []
    for i, v in enumerate(values):
        refused += [why for _, why in replayer.apply(cluster_metadata_record_dict(v), ("f", i, 0))]
    return image, replayer, refused


def test_the_other_deltas():
    from kafkatool.commands.metadata_shell import _redaction
    from kafkatool.formats.generated.abort_transaction_record import AbortTransactionRecord
    from kafkatool.formats.generated.begin_transaction_record import BeginTransactionRecord
    from kafkatool.formats.generated.broker_registration_change_record import BrokerRegistrationChangeRecord
    from kafkatool.formats.generated.delegation_token_record import DelegationTokenRecord
    from kafkatool.formats.generated.end_transaction_record import EndTransactionRecord
    from kafkatool.formats.generated.register_controller_record import (
        ControllerEndpoint,
        RegisterControllerRecord,
    )
    from kafkatool.formats.generated.remove_access_control_entry_record import RemoveAccessControlEntryRecord
    from kafkatool.formats.generated.unregister_broker_record import UnregisterBrokerRecord
    from kafkatool.formats.metadata_image import root_node

    image, replayer, refused = _image(
        [
            broker(1, 10, True),
            broker(3, 30, False),
            rec(
                BrokerRegistrationChangeRecord(
                    broker_id=1, broker_epoch=10, fenced=-1, in_controlled_shutdown=1
                )
            ),
            rec(
                BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=9, fenced=1)
            ),  # stale epoch: refused
            rec(UnregisterBrokerRecord(broker_id=3, broker_epoch=30)),
            rec(
                RegisterControllerRecord(
                    controller_id=3000,
                    incarnation_id=INCARNATION,
                    zk_migration_ready=False,
                    end_points=[
                        ControllerEndpoint(name="CONTROLLER", host="c", port=9093, security_protocol=0)
                    ],
                )
            ),
            rec(FeatureLevelRecord(name="kraft.version", feature_level=1)),
            rec(FeatureLevelRecord(name="group.version", feature_level=1)),
            rec(FeatureLevelRecord(name="group.version", feature_level=0)),  # level 0: gone
            rec(
                DelegationTokenRecord(
                    owner="User:bob",
                    requester="User:bob",
                    renewers=["User:carol"],
                    issue_timestamp=1,
                    max_timestamp=3,
                    expiration_timestamp=2,
                    token_id="tok1",
                )
            ),  # fmt: skip
            rec(RemoveAccessControlEntryRecord(id_=ACL)),  # no such ACL: refused
            rec(BeginTransactionRecord(name="t1")),
            rec(TopicRecord(name="aborted", topic_id=FOO)),
            rec(AbortTransactionRecord(reason="x")),
            rec(BeginTransactionRecord(name="t2")),
            rec(TopicRecord(name="committed", topic_id=BAR)),
            rec(EndTransactionRecord()),
            rec(BeginTransactionRecord(name="t3")),
            rec(TopicRecord(name="open", topic_id=GHOST)),
        ]
    )
    assert refused == [
        "Tried to change broker 1, but the given epoch, 9, did not match the current broker epoch, 10",
        f"Failed to find existing ACL with ID {uuid_bytes_to_string(ACL.bytes)} in either image or changes",
    ]
    assert (image.brokers[1].fenced, image.brokers[1].in_controlled_shutdown, 3 in image.brokers) == (
        False,
        True,
        False,
    )
    assert set(image.topic_ids) == {"committed"} and len(replayer.pending) == 1
    root = root_node(image, {"version": "v", "commitId": "c"})
    out = io.StringIO()
    from kafkatool.forensics.metadata_shell import Shell

    shell = Shell(root, _redaction(), out)
    shell.run(["cat", "/image/cluster/controllers/3000", "/image/delegationToken/tok1", "/local/*"])
    shell.run(["ls", "/image/features"])
    assert out.getvalue().splitlines() == [
        f"ControllerRegistration(id=3000, incarnationId={uuid_bytes_to_string(INCARNATION.bytes)}, "
        "zkMigrationReady=false, listeners=[Endpoint(listenerName='CONTROLLER', securityProtocol=PLAINTEXT, "
        "host='c', port=9093)], supportedFeatures={})",
        "DelegationTokenDatatokenId=[redacted](owner=[redacted](tokenRequester=[redacted](renewers=[redacted], "
        "issueTimestamp=[redacted], maxTimestamp=[redacted]), expiryTimestamp=[redacted]",
        "c",
        "v",
        "finalized_kraft.version",
        "metadataVersion",
        "zkMigrationState",
    ]


def test_the_latest_snapshot_replaces_the_image_and_nothing_is_written(tmp_path):
    mdir = write_metadata_dir(tmp_path / "__cluster_metadata-0")
    header = struct.pack(">hq", 0, T0 + 9) + b"\x00"
    newer = R.build_record_batch(
        [R.SimpleRecord(header, struct.pack(">hh", 0, R.SNAPSHOT_HEADER), (), T0)], is_control=True
    ) + batch([rec(TopicRecord(name="only", topic_id=GHOST))], 0)
    (mdir / "00000000000000000022-0000000002.checkpoint").write_bytes(newer)
    (mdir / "00000000000000000030-0000000002.checkpoint.part").write_bytes(b"in progress")
    (mdir.parent / ".lock").write_bytes(b"")
    before = {p: (p.stat().st_mtime_ns, p.is_file() and p.read_bytes()) for p in tmp_path.rglob("*")}
    r = run("-d", str(mdir), "find", "/image/topics/byName", "/image/provenance")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "/image/topics/byName", "/image/topics/byName/only", "/image/topics/byName/only/id", "/image/topics/byName/only/name", "/image/provenance",
    ]  # fmt: skip
    assert run("-d", str(mdir), "cat", "/image/provenance").stdout == (
        "offset 21, epoch 2, time 2023-11-14T22:13:20.009Z[UTC]\n"
    )
    assert {p: (p.stat().st_mtime_ns, p.is_file() and p.read_bytes()) for p in tmp_path.rglob("*")} == before


def test_help_man_history(mdir):
    r = run("-d", str(mdir), stdin="help\nman cat\nman nope\nls -h\n")
    lines = r.stdout.splitlines()
    assert (
        lines[0] == "Welcome to the Apache Kafka metadata shell."
        and "    cat                  Show the contents of metadata files." in lines
    )
    assert "cat: Show the contents of metadata files." in lines
    assert "man: unknown command nope. Type help to get a list of commands." in lines
    assert "ls: List metadata nodes." in lines


def test_offsets_the_dir_lacks(tmp_path):
    mdir = tmp_path / "__cluster_metadata-0"
    mdir.mkdir()
    log = mdir / "00000000000000000005.log"
    log.write_bytes(
        batch([rec(TopicRecord(name="late", topic_id=FOO))], 5) + batch([config(2, "late", "a", "b")], 9)
    )
    r = run("-d", str(tmp_path), "ls", "/image/topics/byName")
    assert (r.returncode, r.stdout) == (1, "late\n")
    second = len(batch([rec(TopicRecord(name="late", topic_id=FOO))], 5))
    assert r.stderr.splitlines() == [
        f"kafkatool: error: {log}: offsets 0 to 4 are missing before the batch at byte 0: the image lacks their records",
        f"kafkatool: error: {log}: offsets 6 to 8 are missing before the batch at byte {second}: the image lacks "
        "their records",
    ]
    assert ts.read_kraft(tmp_path, node_id=1).notes == [
        line[len("kafkatool: error: ") :] for line in r.stderr.splitlines()
    ]
