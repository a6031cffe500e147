"""kafkatool broker-api-versions (kafka-broker-api-versions.sh, Kafka 3.7's
BrokerApiVersionsCommand with NodeApiVersions.toString(true)) against a real `kafkatool serve`
of two processes (two brokers, node ids 1 and 2), reached on two listeners: PLAINTEXT,
advertised where the brokers listen, and EXTERNAL, advertised at ports nothing listens on
(brokers the tool cannot reach)."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from kafkatool.assign.api_versions import ApiEntry, api_entries
from kafkatool.cli import app
from kafkatool.protocol.apis import API_BY_KEY
from tests.broker.conftest import BrokerProcess
from tests.broker.test_processes import free_base_port
from tests.broker.wire import WireClient
from tests.cli_result import one_line_error

runner = CliRunner()
STEP = 3
DISCONNECT = "org.apache.kafka.common.errors.DisconnectException"


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    """(the broker, the EXTERNAL listener's bootstrap, the ports EXTERNAL advertises)."""
    port, external, dead = (free_base_port(2, STEP) for _ in range(3))
    b = BrokerProcess(
        tmp_path_factory.mktemp("api-versions") / "data",
        port=port,
        extra=[
            f"listeners=PLAINTEXT://127.0.0.1:{port},EXTERNAL://127.0.0.1:{external}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port},EXTERNAL://127.0.0.1:{dead}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "kafkatool.processes=2",
            f"kafkatool.processes.port.step={STEP}",
            "num.partitions=1",
        ],
    ).start(timeout=40)
    yield b, f"127.0.0.1:{external}", (dead, dead + STEP)
    b.stop()


def run(*args):
    res = runner.invoke(app, ["broker-api-versions", *map(str, args)])
    assert "Traceback" not in res.output, res.output
    return res


def answer(bootstrap: str) -> dict[int, tuple[int, int]]:
    """The broker's own ApiVersions answer, asked on a connection of the test's own."""
    with WireClient(bootstrap) as c:
        r = c.api_versions()
    assert r.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}


LINE = re.compile(r"^\t(\w+)\((\d+)\): (?:(UNSUPPORTED)|(\d+)(?: to (\d+))?(?: \[usable: (\d+)\])?)(,?)$")


def test_every_broker_in_kafkas_format_with_its_own_answer(brokers):
    b, _, _ = brokers
    res = run("--bootstrap-server", b.bootstrap)
    assert res.exit_code == 0, res.output
    assert res.stderr == ""
    out = res.stdout
    blocks = out.split(")\n")
    assert blocks[-1] == "" and len(blocks) == 3, out
    for node_id, block in zip((1, 2), blocks[:2], strict=True):
        port = b.port + (node_id - 1) * STEP
        head, *lines = block.split("\n")
        assert head == f"127.0.0.1:{port} (id: {node_id} rack: null) -> (", head
        assert lines[-1] == ""  # the ")" line ends the block
        lines = lines[:-1]
        theirs = answer(f"127.0.0.1:{port}")
        seen = {}
        for i, line in enumerate(lines):
            m = LINE.match(line)
            assert m, line
            name, key, unsupported, lo, hi, usable, comma = m.groups()
            assert comma == ("," if i < len(lines) - 1 else ""), line
            key = int(key)
            assert name == API_BY_KEY[key].name  # every API this broker lists is one kafkatool knows
            if unsupported:
                assert key not in theirs and {"zkBroker", "broker"} & set(API_BY_KEY[key].listeners)
            else:
                single = hi is None  # "N" alone when the range is one version
                lo, hi = int(lo), int(lo if single else hi)
                assert (lo, hi) == theirs[key] and single == (lo == hi), line
                assert int(usable) == min(hi, API_BY_KEY[key].max_version), line
            seen[key] = line
        assert list(seen) == sorted(seen)  # by API key
        assert set(theirs) <= set(seen)
        # the lines as Kafka prints them, for APIs whose ranges this broker fixes
        lo, hi = theirs[0]
        assert seen[0] == f"\tProduce(0): {lo} to {hi} [usable: {min(hi, API_BY_KEY[0].max_version)}],"
        assert seen[4] == "\tLeaderAndIsr(4): UNSUPPORTED,"  # a ZooKeeper-mode controller's API
        assert theirs[45] == (0, 0) and seen[45] == "\tAlterPartitionReassignments(45): 0 [usable: 0],"


def test_json_one_object_per_broker(brokers):
    b, _, _ = brokers
    res = run("--bootstrap-server", b.bootstrap, "--json")
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.stdout.splitlines()]
    assert [r["broker"] for r in rows] == [1, 2]
    for r in rows:
        assert (r["host"], r["port"], r["rack"]) == ("127.0.0.1", b.port + (r["broker"] - 1) * STEP, None)
        assert r["error"] is None and r["reason"] is None
        theirs = answer(f"127.0.0.1:{r['port']}")
        apis = {a["api_key"]: a for a in r["apis"]}
        for key, (lo, hi) in theirs.items():
            a = apis[key]
            assert (a["name"], a["min_version"], a["max_version"]) == (API_BY_KEY[key].name, lo, hi)
            assert (a["status"], a["usable"]) == ("usable", min(hi, API_BY_KEY[key].max_version))
        assert apis[4] == {
            "api_key": 4, "name": "LeaderAndIsr", "min_version": None, "max_version": None,
            "status": "unsupported", "usable": None,
        }  # fmt: skip


def test_an_unreachable_broker_is_kafkas_error_line_and_exit_1(brokers):
    """Metadata on EXTERNAL lists both brokers at ports nothing listens on: each is Kafka's
    ERROR line (ConsumerNetworkClient's DisconnectException), the reason on stderr, exit 1."""
    _, external, dead = brokers
    res = run("--bootstrap-server", external)
    assert res.exit_code == 1, res.output
    assert res.stdout == "".join(
        f"127.0.0.1:{p} (id: {n} rack: null) -> ERROR: {DISCONNECT}\n"
        for n, p in zip((1, 2), dead, strict=True)
    )
    assert res.stderr.splitlines() == [
        f"kafkatool: error: broker {n}: 127.0.0.1:{p}: cannot connect: Connection refused"
        for n, p in zip((1, 2), dead, strict=True)
    ]
    rows = [json.loads(x) for x in run("--bootstrap-server", external, "--json").stdout.splitlines()]
    assert [(r["broker"], r["port"], r["error"], r["apis"]) for r in rows] == [
        (n, p, DISCONNECT, None) for n, p in zip((1, 2), dead, strict=True)
    ]


def test_no_reachable_bootstrap_and_bad_options_are_one_line_exit_2(brokers, tmp_path):
    _, _, dead = brokers
    line = one_line_error(run("--bootstrap-server", f"127.0.0.1:{dead[0]}"))
    assert line == (
        f"kafkatool: error: no bootstrap server reachable: 127.0.0.1:{dead[0]}: cannot connect: Connection refused"
    )
    assert "is not host:port" in one_line_error(run("--bootstrap-server", "nohost"))
    assert "--bootstrap-server" in run().output and run().exit_code == 2
    cfg = tmp_path / "client.properties"
    cfg.write_text("request.timeout.ms=soon\n")
    line = one_line_error(run("--bootstrap-server", f"127.0.0.1:{dead[0]}", "--command-config", cfg))
    assert "request.timeout.ms" in line and "soon" in line


def test_request_timeout_of_the_command_config_is_taken(brokers, tmp_path):
    """request.timeout.ms of --command-config is read as the client's ConfigDef reads it: a
    value is used (the brokers answer well within 2 s), a bad one is one line, exit 2."""
    b, _, _ = brokers
    cfg = tmp_path / "client.properties"
    cfg.write_text("request.timeout.ms=2000\n")
    res = run("--bootstrap-server", b.bootstrap, "--command-config", cfg)
    assert res.exit_code == 0 and res.stdout.count(" -> (") == 2, res.output
    cfg.write_text("request.timeout.ms=-5\n")
    line = one_line_error(run("--bootstrap-server", b.bootstrap, "--command-config", cfg))
    assert "request.timeout.ms" in line and "-5" in line, line


def test_request_timeout_of_the_command_config_bounds_a_silent_broker(tmp_path):
    """A broker that accepts and never answers (a listening socket nobody reads) is given up
    on after request.timeout.ms: one line, exit 2 (it was the bootstrap). Without SASL the
    ApiVersions request is the channel's first request, bounded by request.timeout.ms, not by
    the connection set-up's timeout (NetworkClient)."""
    import socket
    import time

    cfg = tmp_path / "client.properties"
    cfg.write_text("request.timeout.ms=300\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        t0 = time.monotonic()
        line = one_line_error(
            run("--bootstrap-server", f"127.0.0.1:{s.getsockname()[1]}", "--command-config", cfg)
        )
        took = time.monotonic() - t0
    assert "no response within 0.3s" in line, line
    assert took < 5, took


def test_node_api_versions_text():
    """NodeApiVersions.apiVersionToText for what a real broker here never answers: an API the
    client does not know, ranges with no version in common, a single version."""
    produce = API_BY_KEY[0]
    entries = api_entries(
        {
            0: (produce.max_version + 1, produce.max_version + 3),
            1: (0, 0),
            3: (API_BY_KEY[3].max_version + 1, API_BY_KEY[3].max_version + 1),
            999: (2, 5),
        }
    )
    text = {e.key: e.text() for e in entries}
    top = produce.max_version
    assert text[0] == f"Produce(0): {top + 1} to {top + 3} [unusable: node too new]"
    assert text[1] == "Fetch(1): 0 [usable: 0]"
    assert text[999] == "UNKNOWN(999): 2 to 5"
    assert text[4] == "LeaderAndIsr(4): UNSUPPORTED"
    assert [e.key for e in entries] == sorted(text)
    # an API only a controller serves is not listed as UNSUPPORTED (ApiKeys.clientApis)
    controller_only = [k for k, i in API_BY_KEY.items() if set(i.listeners) == {"controller"}]
    assert controller_only and not set(controller_only) & set(text)
    old = API_BY_KEY[2]
    assert old.min_version == 0  # below the oldest version kafkatool knows: node too old
    assert (
        ApiEntry(2, old.name, -3, -1, "node_too_old", None).text()
        == "ListOffsets(2): -3 to -1 [unusable: node too old]"
    )
    too_old = api_entries({2: (-3, -1)})
    assert next(e for e in too_old if e.key == 2).status == "node_too_old"
