"""kafkatool topics get-offsets / delete-records (kafka-get-offsets.sh, kafka-delete-records.sh)
against a real `kafkatool serve`: the answers equal what a real client (librdkafka) sees, before
and after a delete, and get-offsets --log-dir on the broker's dir gives the same answers."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.security.test_sasl import command_config, secured  # noqa: F401 (its SASL_SSL broker)
from tests.cli_result import one_line_error

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, OffsetSpec  # noqa: E402

runner = CliRunner()
T0 = 1_700_000_000_000
T1 = T0 + 10_000
#: batch A (offsets 0-4) at T0..T0+4; batch B (offsets 5-9), its third record the largest timestamp
TIMESTAMPS = [T0 + i for i in range(5)] + [T1, T1 + 1, T1 + 100, T1 + 3, T1 + 4]


def run(*args):
    return runner.invoke(app, ["topics", *map(str, args)])


def offsets_of(res) -> dict[tuple[str, int], int]:
    assert res.exit_code == 0, res.output
    out = {}
    for line in res.stdout.splitlines():
        t, p, o = line.rsplit(":", 2)
        out[(t, int(p))] = int(o)
    return out


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        tmp_path_factory.mktemp("offsets") / "data", port=free_port(), extra=["num.partitions=1"]
    ).start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def events(broker):
    """Topic ev: partition 0 holds two batches (TIMESTAMPS), partition 1 nothing."""
    boot = ["--bootstrap-server", broker.bootstrap]
    assert run("create", "--topic", "ev", "--partitions", 2, *boot).exit_code == 0
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for batch in (TIMESTAMPS[:5], TIMESTAMPS[5:]):
        for ts in batch:
            p.produce("ev", value=b"v%d" % ts, partition=0, timestamp=ts)
        assert p.flush(15) == 0
    return "ev"


def client_view(broker, topic: str, partitions: int) -> dict[str, dict[tuple[str, int], int]]:
    """What librdkafka sees: watermarks, offsets_for_times, and the admin's max-timestamp."""
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "view", "enable.auto.commit": False})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        tps = [(topic, p) for p in range(partitions)]
        marks = {tp: c.get_watermark_offsets(ck.TopicPartition(*tp), timeout=10) for tp in tps}
        view = {
            "earliest": {tp: m[0] for tp, m in marks.items()},
            "latest": {tp: m[1] for tp, m in marks.items()},
        }
        for name, ts in (("between", T0 + 5_000), ("first", T0), ("after", T1 + 1_000)):
            got = c.offsets_for_times([ck.TopicPartition(t, p, ts) for t, p in tps], timeout=10)
            view[name] = {(x.topic, x.partition): x.offset for x in got if x.offset >= 0}
        futures = admin.list_offsets({ck.TopicPartition(*tp): OffsetSpec.max_timestamp() for tp in tps})
        view["max-timestamp"] = {}
        for tp, f in futures.items():
            r = f.result(timeout=10)
            if r.offset >= 0:
                view["max-timestamp"][(tp.topic, tp.partition)] = r.offset
        return view
    finally:
        c.close()


SPECS = {"earliest": "earliest", "latest": "-1", "between": T0 + 5_000, "first": T0, "after": T1 + 1_000,
         "max-timestamp": "max-timestamp"}  # fmt: skip


def tool_view(where: list, topic: str) -> dict[str, dict[tuple[str, int], int]]:
    return {
        name: offsets_of(run("get-offsets", "--topic", topic, "--time", spec, *where))
        for name, spec in SPECS.items()
    }


def test_get_offsets_and_delete_records_agree_with_a_client(broker, events):
    boot = ["--bootstrap-server", broker.bootstrap]
    offline = ["--log-dir", broker.data_dir]
    client = client_view(broker, events, 2)
    tool = tool_view(boot, events)
    assert tool == client
    assert tool["latest"] == {("ev", 0): 10, ("ev", 1): 0}
    assert tool["between"] == {("ev", 0): 5} and tool["max-timestamp"] == {("ev", 0): 7}
    assert tool["after"] == {}  # no such offset: the partition's line is left out, as Kafka does
    assert tool_view(offline, events) == client
    js = [
        json.loads(x)
        for x in run(
            "get-offsets", "--topic", "ev", "--time", T1 + 1_000, "--json", *boot
        ).stdout.splitlines()
    ]
    assert [(r["partition"], r["offset"]) for r in js] == [(0, None), (1, None)]
    assert run("get-offsets", "--topic", "ev", "--time", -2, *boot).stdout == "ev:0:0\nev:1:0\n"

    spec = {"partitions": [{"topic": "ev", "partition": 0, "offset": 3}], "version": 1}
    res = run_delete(broker, spec, "--dry-run")
    assert res.exit_code == 1 and res.stdout == "partition: ev-0\toffset: 3\n", res.output
    assert offsets_of(run("get-offsets", "--topic", "ev", "--time", "earliest", *boot))[("ev", 0)] == 0
    res = run_delete(broker, spec)
    assert res.exit_code == 0, res.output
    assert res.stdout == (
        "Executing records delete operation\nRecords delete operation completed:\npartition: ev-0\tlow_watermark: 3\n"
    )
    after = client_view(broker, events, 2)
    assert after["earliest"][("ev", 0)] == 3 and after["first"] == {("ev", 0): 3}
    assert tool_view(boot, events) == after
    assert tool_view(offline, events) == after
    # a consumer from the beginning now starts at the new log start offset
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "from-start",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    try:
        c.assign([ck.TopicPartition("ev", 0, ck.OFFSET_BEGINNING)])
        first = None
        deadline = time.monotonic() + 15
        while first is None and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                first = m.offset()
        assert first == 3
    finally:
        c.close()


def run_delete(broker, spec, *extra, tmp_name="offsets.json"):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / tmp_name
        f.write_text(spec if isinstance(spec, str) else json.dumps(spec))
        return run("delete-records", "--offset-json-file", f, "--bootstrap-server", broker.bootstrap, *extra)


def test_delete_records_reports_kafkas_errors(broker, events):
    spec = {"partitions": [{"topic": "ev", "partition": 0, "offset": 100}, {"topic": "ev", "partition": 9,
            "offset": 0}, {"topic": "nosuch", "partition": 0, "offset": 0}]}  # fmt: skip
    res = run_delete(broker, spec)
    assert res.exit_code == 1, res.output
    lines = res.stdout.splitlines()
    assert lines[:2] == ["Executing records delete operation", "Records delete operation completed:"]
    rows = dict(x.split("\t", 1) for x in lines[2:])
    assert rows["partition: ev-0"] == "error: OFFSET_OUT_OF_RANGE"
    assert rows["partition: ev-9"].startswith("error: UNKNOWN_TOPIC_OR_PARTITION")
    assert rows["partition: nosuch-0"].startswith("error: UNKNOWN_TOPIC_OR_PARTITION")
    # nothing moved: the log start offset is where the first test left it (or 0 run alone)
    low = offsets_of(run("get-offsets", "--topic", "ev", "--partitions", 0, "--time", -2,
                         "--bootstrap-server", broker.bootstrap))[("ev", 0)]  # fmt: skip
    assert low in (0, 3)
    js = [json.loads(x) for x in run_delete(broker, spec, "--json").stdout.splitlines()]
    assert {(r["partition"], r["error"].split(":")[0]) for r in js} == {
        (0, "OFFSET_OUT_OF_RANGE"), (9, "UNKNOWN_TOPIC_OR_PARTITION"), (0, "UNKNOWN_TOPIC_OR_PARTITION")}  # fmt: skip


def test_filters_and_kafkas_order(broker):
    boot = ["--bootstrap-server", broker.bootstrap]
    assert run("create", "--topic", "many", "--partitions", 11, *boot).exit_code == 0
    res = run("get-offsets", "--topic", "many", *boot)
    assert [x.split(":")[1] for x in res.stdout.splitlines()] == ["0", "1", "10", *map(str, range(2, 10))]
    res = run("get-offsets", "--topic-partitions", "many:2-4,:10,ma.y:7-", "--exclude-internal-topics", *boot)
    assert res.stdout.split() == ["many:10:0", "many:2:0", "many:3:0", "many:7:0", "many:8:0", "many:9:0"]
    assert run("get-offsets", "--topic", "many", "--partitions", "0,3", *boot).stdout.split() == [
        "many:0:0",
        "many:3:0",
    ]
    offline = run("get-offsets", "--topic-partitions", "many:-2", "--log-dir", broker.data_dir)
    assert offline.stdout.split() == ["many:0:0", "many:1:0"]
    # a partition answered with an error: GetOffsetShell's stderr line, exit 1 (and so offline)
    for where in (boot, ["--log-dir", broker.data_dir]):
        res = run("get-offsets", "--topic", "many", "--partitions", 4, "--time", -7, *where)
        assert res.stdout == "" and res.exit_code == 1, res.output
        assert res.stderr.strip() == (
            "kafkatool: error: Skip getting offsets for topic-partition many-4 due to error: INVALID_REQUEST"
        )
    res = run("get-offsets", "--topic", "none.*", *boot)
    assert one_line_error(res, 1).endswith("Could not match any topic-partitions with the specified filters")


@pytest.mark.parametrize(
    "args, words",
    [
        (["--time", "yesterday"], "Malformed time argument yesterday"),
        (["--time", "99999999999999999999"], "Malformed time argument"),
        (["--partitions", "0,5-7"], "--partitions expects a comma separated list of numeric partition ids"),
        (["--topic-partitions", "ev:1-2-3"], "Invalid rule specification: ev:1-2-3"),
        (["--topic-partitions", "ev:99999999999"], "Invalid rule specification"),
        (["--topic-partitions", "ev:1", "--topic", "ev"], "--topic-partitions cannot be used with --topic"),
        (["--topic", "("], "is an invalid regex"),
    ],
)
def test_get_offsets_bad_input_is_one_line(broker, args, words):
    assert words in one_line_error(run("get-offsets", *args, "--bootstrap-server", broker.bootstrap))


def test_unreachable_and_conflicting_sources(broker, tmp_path):
    dead = f"127.0.0.1:{free_port()}"
    assert "no bootstrap server reachable" in one_line_error(run("get-offsets", "--bootstrap-server", dead))
    both = run("get-offsets", "--bootstrap-server", broker.bootstrap, "--log-dir", broker.data_dir)
    assert "exactly one of" in one_line_error(both)
    (tmp_path / "cat.jpg").write_bytes(b"\xff\xd8 not kafka")
    one_line_error(run("get-offsets", "--log-dir", tmp_path / "cat.jpg"))
    spec = {"partitions": [{"topic": "ev", "partition": 0, "offset": 0}]}
    f = tmp_path / "o.json"
    f.write_text(json.dumps(spec))
    res = run("delete-records", "--offset-json-file", f, "--bootstrap-server", dead)
    assert (
        res.exit_code == 2 and "no bootstrap server reachable" in res.output and "Traceback" not in res.output
    )


@pytest.mark.parametrize(
    "text, words",
    [
        ('{"partitions": [{"topic": "ev", "partition": 0, "offset": 1}', "The input string is not a valid JSON (line 1"),
        ('{"partitions": [{"topic": "ev", "partition": 0, "offset": 1}, {"topic": "ev", "partition": 0, '
         '"offset": 2}], "version": 1}', "Offset json file contains duplicate topic partitions: ev-0"),
        ('{"partitions": [], "version": 2}', "Not supported version field value 2"),
        ('{"version": 1}', "Missing partitions field"),
        ('{"partitions": [{"topic": "ev", "offset": 1}]}', "partitions[0]: No such field exists: `partition`"),
        ('{"partitions": [{"topic": "ev", "partition": "0", "offset": 1}]}', '`partition` is "0", expected an integer'),
        ("[1, 2]", "expected a JSON object"),
    ],
)  # fmt: skip
def test_delete_records_bad_json_is_one_line(broker, text, words):
    assert words in one_line_error(run_delete(broker, text))


def test_delete_records_file_not_utf8_or_missing(broker, tmp_path):
    f = tmp_path / "bin.json"
    f.write_bytes(b'{"partitions": [\xff]}')
    line = one_line_error(
        run("delete-records", "--offset-json-file", f, "--bootstrap-server", broker.bootstrap)
    )
    assert str(f) in line and "byte 16" in line
    missing = run(
        "delete-records", "--offset-json-file", tmp_path / "nope.json", "--bootstrap-server", broker.bootstrap
    )
    assert "nope.json" in one_line_error(missing)


def test_over_sasl_ssl_with_command_config(secured, tmp_path):  # noqa: F811
    """--command-config: both commands reach a SASL_SSL listener (the leader's address from its
    Metadata, the same security), and without it they cannot (one line, exit 2)."""
    p = ck.Producer({"bootstrap.servers": secured.bootstrap, "linger.ms": 0})
    for i in range(4):
        p.produce("secured-offsets", value=b"x", partition=0, timestamp=T0 + i)
    assert p.flush(15) == 0
    cfg = command_config(secured, tmp_path / "client.properties")
    sec = ["--bootstrap-server", secured.sasl_ssl, "--command-config", cfg]
    assert run("get-offsets", "--topic", "secured-offsets", *sec).stdout == "secured-offsets:0:4\n"
    f = tmp_path / "o.json"
    f.write_text(json.dumps({"partitions": [{"topic": "secured-offsets", "partition": 0, "offset": -1}]}))
    res = run("delete-records", "--offset-json-file", f, *sec)
    assert res.exit_code == 0 and res.stdout.endswith("partition: secured-offsets-0\tlow_watermark: 4\n"), (
        res.output
    )
    earliest = run("get-offsets", "--topic", "secured-offsets", "--time", "earliest", *sec)
    assert earliest.stdout == "secured-offsets:0:4\n"
    one_line_error(run("get-offsets", "--topic", "secured-offsets", "--bootstrap-server", secured.sasl_ssl))
