"""``kafkatool reassign place`` and offline ``generate`` through the real CLI app."""

import json

import pytest
from typer.testing import CliRunner

from kafkatool.assign.formats import format_reassignment, parse_reassignment
from kafkatool.cli import app


def run(*args):
    result = CliRunner().invoke(app, ["reassign", *map(str, args)])
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
        result.exception
    )
    return result


def test_place_json_is_kafkas_assignment():
    r = run(
        "place",
        "--brokers",
        "0:r1,1:r3,2:r3,3:r2,4:r2,5:r1",
        "--partitions",
        7,
        "--replication-factor",
        3,
        "--start-index",
        0,
        "--json",
    )
    assert r.exit_code == 0
    obj = json.loads(r.stdout)
    assert obj["partitions"][5] == {"partition": 5, "replicas": [2, 0, 3]}
    assert obj["partitions"][6] == {"partition": 6, "replicas": [0, 4, 2]}
    assert obj["replica_assignment"].startswith("0:3:1,3:1:5,")
    assert (obj["start_index"], obj["replica_shift"], obj["rack_aware"]) == (0, 0, True)


def test_place_added_partitions_and_human_view():
    r = run(
        "place",
        "--brokers",
        "0,1,2,3,4",
        "--partitions",
        3,
        "--replication-factor",
        3,
        "--start-index",
        0,
        "--first-partition",
        4,
    )
    assert r.exit_code == 0
    assert "--replica-assignment 4:0:1,0:2:3,1:3:4" in r.stdout


def test_place_seed_is_reproducible_and_reported():
    a = json.loads(
        run(
            "place",
            "--brokers",
            "0,1,2,3,4",
            "--partitions",
            3,
            "--replication-factor",
            2,
            "--seed",
            42,
            "--json",
        ).stdout
    )
    assert a["seed"] == 42 and (a["start_index"], a["replica_shift"]) == (0, 3)
    assert [p["replicas"] for p in a["partitions"]] == [[0, 4], [1, 0], [2, 1]]
    b = json.loads(
        run("place", "--brokers", "0,1,2", "--partitions", 2, "--replication-factor", 2, "--json").stdout
    )
    again = json.loads(
        run(
            "place",
            "--brokers",
            "0,1,2",
            "--partitions",
            2,
            "--replication-factor",
            2,
            "--seed",
            b["seed"],
            "--json",
        ).stdout
    )
    assert again == b


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--brokers", "0,1", "--partitions", 2, "--replication-factor", 3],
            "Replication factor: 3 larger than available brokers: 2.",
        ),
        (
            ["--brokers", "0:a,1,2:b", "--partitions", 2, "--replication-factor", 2],
            "not all brokers have rack information (no rack on broker 1)",
        ),
        (["--brokers", "0,1,0", "--partitions", 2, "--replication-factor", 2], "duplicate entries: 0"),
        (
            ["--brokers", "0,1", "--partitions", 2, "--replication-factor", 1, "--replica-shift", 1],
            "--replica-shift needs --start-index",
        ),
    ],
)
def test_place_errors_are_one_line_exit_2(args, message):
    r = run("place", *args)
    assert r.exit_code == 2
    assert r.stderr == f"kafkatool: error: {message}\n" or (
        r.stderr.startswith("kafkatool: error: ") and message in r.stderr and r.stderr.count("\n") == 1
    )


@pytest.fixture
def offline(tmp_path):
    current = {("a", p): [p % 3 + 1, (p + 1) % 3 + 1] for p in range(6)}
    current.update({("b", p): [1, 2] for p in range(3)})
    (tmp_path / "current.json").write_text(format_reassignment(current))
    (tmp_path / "topics.json").write_text('{"version":1,"topics":[{"topic":"a"},{"topic":"b"}]}')
    return tmp_path, current


def test_generate_kafka_strategy_matches_placement(offline):
    tmp, current = offline
    r = run(
        "generate",
        "--topics-to-move-json-file",
        tmp / "topics.json",
        "--broker-list",
        "1,2,3,4",
        "--current",
        tmp / "current.json",
        "--start-index",
        1,
        "--output",
        tmp / "plan.json",
    )
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[1] == format_reassignment(current)
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = {t.tp: t.replicas for t in parse_reassignment(lines[4])}
    # start index 1 (shift 1) on [1,2,3,4]: a-0 leader B[1]=2, follower (1+1+1%3)%4=3 -> 4
    assert proposed[("a", 0)] == [2, 4]
    assert proposed[("b", 2)] == [4, 2]  # f=(2+1)%4=3 -> 4; follower (3+1+1%3)%4=1 -> B[1]=2
    assert (tmp / "plan.json").read_text() == lines[4] + "\n"
    assert "replica(s) moved" in r.stdout


def test_generate_minimal_json_report(offline):
    tmp, current = offline
    r = run(
        "generate",
        "--topics-to-move-json-file",
        tmp / "topics.json",
        "--broker-list",
        "1,2,3,4",
        "--current",
        tmp / "current.json",
        "--strategy",
        "minimal",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    obj = json.loads(r.stdout)
    rep = obj["report"]
    # 18 replicas over 4 brokers: broker 4 takes 4 (or 5), from the fullest
    assert rep["replicas_moved"] == 4
    assert rep["balance"]["replicas"]["after"]["spread"] <= 1
    assert {p["topic"] for p in obj["proposed"]["partitions"]} <= {"a", "b"}
    assert len(obj["current"]["partitions"]) == len(obj["proposed"]["partitions"])


def test_generate_input_errors(offline, tmp_path):
    tmp, _ = offline
    (tmp / "bad.json").write_text('{"version":1,"topics":[{"topic":"a"},{"topic":"a"}]}')
    r = run(
        "generate",
        "--topics-to-move-json-file",
        tmp / "bad.json",
        "--broker-list",
        "1,2",
        "--current",
        tmp / "current.json",
    )
    assert r.exit_code == 2
    assert "duplicate entries: a" in r.stderr and r.stderr.count("\n") == 1
    (tmp / "t.json").write_text('{"topics":[{"topic":"zzz"}]}')
    r = run(
        "generate",
        "--topics-to-move-json-file",
        tmp / "t.json",
        "--broker-list",
        "1,2",
        "--current",
        tmp / "current.json",
    )
    assert r.exit_code == 2 and "topic not found: zzz" in r.stderr
    r = run(
        "generate",
        "--topics-to-move-json-file",
        tmp / "topics.json",
        "--broker-list",
        "1",
        "--current",
        tmp / "current.json",
    )
    assert r.exit_code == 2 and "topic a: Replication factor: 2 larger than available brokers: 1." in r.stderr
    r = run(
        "generate",
        "--topics-to-move-json-file",
        tmp / "topics.json",
        "--broker-list",
        "1,2",
        "--current",
        tmp / "current.json",
        "--strategy",
        "size",
    )
    assert r.exit_code == 2 and "--strategy size needs --sizes FILE" in r.stderr
    r = run(
        "generate",
        "--topics-to-move-json-file",
        tmp / "missing.json",
        "--broker-list",
        "1,2",
        "--current",
        tmp / "current.json",
    )
    assert r.exit_code == 2 and "missing.json" in r.stderr


def test_generate_size_strategy_with_fleet_lines(offline):
    tmp, current = offline
    lines = [
        json.dumps(
            {"type": "partition_size", "topic": t, "partition": p, "broker": 1, "size": 1000 * (p + 1)}
        )
        for t, p in current
    ]
    (tmp / "sizes.jsonl").write_text("\n".join(lines) + "\n")
    r = run(
        "generate",
        "--topics-to-move-json-file",
        tmp / "topics.json",
        "--broker-list",
        "1,2,3,4",
        "--current",
        tmp / "current.json",
        "--strategy",
        "size",
        "--sizes",
        tmp / "sizes.jsonl",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    rep = json.loads(r.stdout)["report"]
    assert rep["bytes_moved"] > 0
    assert rep["balance"]["bytes"]["after"]["spread"] < rep["balance"]["bytes"]["before"]["spread"]
