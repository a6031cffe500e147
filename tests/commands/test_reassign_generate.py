"""``reassign generate --replication-factor`` and ``--demote-brokers`` through the CLI app, with
the current assignment from a file (``--current``): no cluster needed."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kafkatool.assign.election import parse_election_json
from kafkatool.assign.formats import format_reassignment, parse_reassignment
from kafkatool.assign.kafka_placement import assign_replicas
from kafkatool.assign.model import Broker
from kafkatool.cli import app
from tests.cli_result import one_line_error

RACKS = {1: "r1", 2: "r2", 3: "r3", 4: "r1", 5: "r2", 6: "r3"}
BROKER_LIST = ",".join(f"{b}:{r}" for b, r in RACKS.items())


def run(*args):
    return CliRunner().invoke(app, ["reassign", "generate", *map(str, args)])


@pytest.fixture
def files(tmp_path):
    brokers = [Broker(b, r) for b, r in RACKS.items()]
    current = {("a", p): r for p, r in assign_replicas(brokers, 12, 1, start_index=0).items()}
    current.update({("b", p): r for p, r in assign_replicas(brokers, 6, 3, start_index=1).items()})
    (tmp_path / "current.json").write_text(format_reassignment(current))
    (tmp_path / "a.json").write_text('{"version":1,"topics":[{"topic":"a"}]}')
    (tmp_path / "b.json").write_text('{"version":1,"topics":[{"topic":"b"}]}')
    return tmp_path, current


def test_raise_the_replication_factor(files):
    tmp, current = files
    r = run(
        "--topics-to-move-json-file", tmp / "a.json", "--broker-list", BROKER_LIST,
        "--current", tmp / "current.json", "--strategy", "minimal", "--replication-factor", 3,
        "--output", tmp / "plan.json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = {t.tp: t.replicas for t in parse_reassignment(lines[4])}
    assert (tmp / "plan.json").read_text() == lines[4] + "\n"
    assert sorted(proposed) == [("a", p) for p in range(12)]
    for tp, replicas in proposed.items():
        assert len(replicas) == 3 and replicas[0] == current[tp][0]
        assert {RACKS[b] for b in replicas} == {"r1", "r2", "r3"}
    counts = [sum(b in r for r in proposed.values()) for b in RACKS]
    assert counts == [6] * 6
    assert "Plan: 12 partition(s) changed, 24 replica(s) moved, 0 preferred leader(s) changed." in r.stdout


def test_lower_the_replication_factor_json(files):
    tmp, current = files
    sizes = {"partitions": [{"topic": "b", "partition": p, "size": 1000 * (p + 1)} for p in range(6)]}
    (tmp / "sizes.json").write_text(json.dumps(sizes))
    r = run(
        "--topics-to-move-json-file", tmp / "b.json", "--broker-list", BROKER_LIST,
        "--current", tmp / "current.json", "--strategy", "size", "--sizes", tmp / "sizes.json",
        "--replication-factor", 2, "--json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    obj = json.loads(r.stdout)
    assert obj["replication_factor"] == 2 and obj["strategy"] == "size"
    rep = obj["report"]
    assert (rep["replicas_moved"], rep["bytes_moved"], rep["leaders_changed"]) == (0, 0, 0)
    for entry in obj["proposed"]["partitions"]:
        old = current[("b", entry["partition"])]
        assert len(entry["replicas"]) == 2 and entry["replicas"][0] == old[0]
        assert set(entry["replicas"]) < set(old)


def test_kafka_strategy_places_the_new_factor(files):
    tmp, _ = files
    r = run(
        "--topics-to-move-json-file", tmp / "a.json", "--broker-list", BROKER_LIST,
        "--current", tmp / "current.json", "--replication-factor", 2, "--start-index", 3, "--json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    obj = json.loads(r.stdout)
    got = {e["partition"]: e["replicas"] for e in obj["proposed"]["partitions"]}
    assert got == assign_replicas([Broker(b, r) for b, r in RACKS.items()], 12, 2, start_index=3)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--broker-list", "1,2,3", "--replication-factor", 4],
         "Replication factor: 4 larger than available brokers: 3."),
        (["--broker-list", "1,2,3", "--replication-factor", 0], "Replication factor must be larger than 0."),
        (["--replication-factor", 2], "--broker-list is required (except with --demote-brokers)"),
        (["--demote-brokers", "1", "--broker-list", "1,2"],
         "--demote-brokers moves no replica: --broker-list does not apply"),
        (["--demote-brokers", "1:r1"], "--demote-brokers '1:r1': broker ids only, no racks"),
        (["--demote-brokers", "9"], "--demote-brokers: broker 9 holds no replica of these topics"),
        (["--broker-list", "1,2", "--exclude-follower-demotion"],
         "--exclude-follower-demotion goes with --demote-brokers"),
    ],
)  # fmt: skip
def test_refusals_are_one_line(files, extra, message):
    tmp, _ = files
    r = run("--topics-to-move-json-file", tmp / "a.json", "--current", tmp / "current.json", *extra)
    assert one_line_error(r) == f"kafkatool: error: {message}"


def test_demote_brokers_reorders_and_prints_the_election(files):
    tmp, current = files
    r = run(
        "--topics-to-move-json-file", tmp / "b.json", "--current", tmp / "current.json",
        "--demote-brokers", "1,2", "--output", tmp / "demote.json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert out.count("ISR unknown (--current): every replica is assumed in sync.") == 1
    assert out.count("Leaders unknown (--current): every partition is assumed led by its first replica.") == 1
    lines = out.splitlines()
    start = lines.index("Current partition replica assignment")
    proposed = {t.tp: t.replicas for t in parse_reassignment(lines[start + 4])}
    led = sorted(tp for tp, r in current.items() if tp[0] == "b" and r[0] in (1, 2))
    # every partition with 1 or 2 ahead of another broker: those led by them, and followers
    ahead = sorted(
        tp
        for tp, r in current.items()
        if tp[0] == "b" and any(b in (1, 2) and any(c not in (1, 2) for c in r[i:]) for i, b in enumerate(r))
    )
    assert sorted(proposed) == ahead and set(led) < set(ahead)
    for tp, replicas in proposed.items():
        assert sorted(replicas) == sorted(current[tp]) and replicas[0] not in (1, 2)
        assert replicas[-len([b for b in replicas if b in (1, 2)]) :] == [
            b for b in current[tp] if b in (1, 2)
        ]
    assert f"Plan: {len(ahead)} partition(s) changed, 0 replica(s) moved" in out
    execute = f"kafkatool reassign execute --reassignment-json-file {tmp / 'demote.json'} --bootstrap-server HOST:PORT"
    assert execute in lines
    election = (
        "kafkatool leader-election --election-type preferred --bootstrap-server HOST:PORT "
        "--path-to-json-file ELECTION.json"
    )
    i = lines.index(election)
    assert lines[i + 1] == "with ELECTION.json holding:"
    assert parse_election_json(lines[i + 2], "printed") == led


def test_demote_json_and_partitions_left_exit_1(files):
    tmp, current = files
    r = run(
        "--topics-to-move-json-file", tmp / "a.json", "--current", tmp / "current.json",
        "--demote-brokers", "1", "--json",
    )  # fmt: skip
    assert r.exit_code == 1, r.output  # topic a has one replica: broker 1 keeps leading its partitions
    obj = json.loads(r.stdout)
    assert obj["strategy"] == "demote" and obj["demoted_brokers"] == [1]
    assert obj["proposed"]["partitions"] == [] and obj["election"] is None
    assert [(x["topic"], x["partition"]) for x in obj["left"]] == sorted(
        tp for tp, r in current.items() if tp[0] == "a" and r == [1]
    )
    assert {x["reason"] for x in obj["left"]} == {"every replica is on a demoted broker"}
    assert obj["notes"] == [
        "ISR unknown (--current): every replica is assumed in sync.",
        "Leaders unknown (--current): every partition is assumed led by its first replica.",
    ]


def test_demote_excluding_followers_changes_only_the_demoted_preferred_leaders(files):
    tmp, current = files
    r = run(
        "--topics-to-move-json-file", tmp / "b.json", "--current", tmp / "current.json",
        "--demote-brokers", "1,2", "--exclude-follower-demotion", "--json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    obj = json.loads(r.stdout)
    assert obj["exclude_follower_demotion"] is True
    proposed = {(e["topic"], e["partition"]): e["replicas"] for e in obj["proposed"]["partitions"]}
    led = sorted(tp for tp, r in current.items() if tp[0] == "b" and r[0] in (1, 2))
    assert sorted(proposed) == led  # followers on 1 or 2 elsewhere keep their places
    for tp, replicas in proposed.items():
        old = current[tp]
        assert replicas[0] not in (1, 2) and replicas[-1] == old[0]
        assert replicas[1:-1] == [b for b in old if b not in (replicas[0], old[0])]
    assert parse_election_json(json.dumps(obj["election"]), "printed") == led
    # the text form says what the plan changes
    r = run(
        "--topics-to-move-json-file", tmp / "b.json", "--current", tmp / "current.json",
        "--demote-brokers", "1,2", "--exclude-follower-demotion",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "changes the order of the replicas only (brokers 1,2 no longer first):" in r.stdout
    assert f"Plan: {len(led)} partition(s) changed, 0 replica(s) moved" in r.stdout
