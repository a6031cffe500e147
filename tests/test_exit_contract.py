"""The one exit-code contract (kafkatool.commands.common.EXIT_CONTRACT), walked over every
command the CLI has: its help states the contract, and each command keeps it on clean data,
on damaged data and on input that is not Kafka data.

Commands are discovered from the typer app, not listed by hand: a new command is checked
as soon as it exists, and one that reads paths or a cluster must appear in a table below."""

from __future__ import annotations

import json
import shutil

import pytest
from segments import make_partition
from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.commands.common import EXIT_CONTRACT, EXIT_FINDINGS, EXIT_OK, EXIT_USAGE

runner = CliRunner()


def leaf_commands(t=app, prefix=()):
    out = []
    for c in t.registered_commands:
        out.append((*prefix, c.name or c.callback.__name__.replace("_", "-")))
    for g in t.registered_groups:
        out.extend(leaf_commands(g.typer_instance, (*prefix, g.name)))
    return out


COMMANDS = leaf_commands()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_the_walk_finds_every_command():
    names = {" ".join(c) for c in COMMANDS}
    assert {"verify", "dump-log", "recover", "rebuild-index", "retention", "compact", "serve"} <= names
    assert any(c[0] == "zk" for c in COMMANDS) and any(c[0] == "reassign" for c in COMMANDS)
    assert ("fleet", "scan") in COMMANDS


@pytest.mark.parametrize("cmd", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_every_help_states_the_one_contract(cmd):
    res = run(*cmd, "--help")
    assert res.exit_code == 0, res.output
    # each line of the contract, as click renders the unwrapped block
    for line in EXIT_CONTRACT.splitlines():
        line = line.strip()
        if line and line != "\b":
            assert line in res.output, (cmd, line)
    assert "Exit codes:" not in res.output  # no second, older wording


def test_root_help_states_the_contract():
    res = run("--help")
    assert "130  interrupted" in res.output and "0    success" in res.output


# --------------------------------------------------------------------- data


@pytest.fixture
def dirs(tmp_path):
    """A clean log dir (recent timestamps: retention has nothing to do), a damaged copy
    (a flipped byte in a record of the first segment) and a directory of other files."""
    clean = tmp_path / "clean"
    pdir = make_partition(clean, "t-0", segments=2, batches_per_segment=10, codec_cycle=(0,))
    # make_partition's timestamps are from 2023: retention runs get an explicit horizon (LONG)
    damaged = tmp_path / "damaged"
    shutil.copytree(clean, damaged)
    seg = sorted((damaged / "t-0").glob("*.log"))[0]
    buf = bytearray(seg.read_bytes())
    second = 12 + int.from_bytes(buf[8:12], "big")
    buf[second + 100] ^= 0xFF  # inside the second batch's records: a CRC mismatch
    seg.write_bytes(buf)
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_bytes(b"\xff\xd8\xff not kafka")
    (other / "notes.txt").write_text("hello")
    return {"clean": clean, "pdir": pdir, "damaged": damaged, "other": other}


def _summary(res):
    return [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")][-1]


LONG = ["--retention-ms", str(10 * 365 * 86400 * 1000)]

# command -> how to run it on (clean, damaged, not-kafka) and what it must answer
OFFLINE = {
    "verify": lambda d: [
        (["verify", d["clean"]], EXIT_OK),
        (["verify", d["damaged"]], EXIT_FINDINGS),
        (["verify", d["other"]], EXIT_USAGE),
        (["verify", d["other"] / "notes.txt"], EXIT_USAGE),
    ],
    "dump-log": lambda d: [
        (["dump-log", *sorted(d["pdir"].glob("*.log"))], EXIT_OK),
        (["dump-log", "--deep-iteration", *sorted((d["damaged"] / "t-0").glob("*.log"))], EXIT_FINDINGS),
        (["dump-log", d["other"] / "notes.txt"], EXIT_USAGE),
    ],
    "recover": lambda d: [
        (["recover", "--dry-run", d["clean"]], EXIT_OK),
        (["recover", "--dry-run", "--all", d["damaged"]], EXIT_FINDINGS),
        # a repair that succeeds is a success, and leaves the data clean
        (["recover", "--all", d["damaged"]], EXIT_OK),
        (["verify", d["damaged"]], EXIT_OK),
        (["recover", d["other"]], EXIT_USAGE),
    ],
    "rebuild-index": lambda d: [
        (["rebuild-index", "--dry-run", d["clean"]], EXIT_OK),
        (["rebuild-index", d["clean"]], EXIT_OK),
        # rebuild-index does not repair the log: the damage remains, whatever it rebuilt
        (["rebuild-index", d["damaged"]], EXIT_FINDINGS),
        (["rebuild-index", "--dry-run", d["other"]], EXIT_USAGE),
    ],
    "retention": lambda d: [
        (["retention", "--dry-run", *LONG, d["clean"]], EXIT_OK),
        (["retention", "--dry-run", "--retention-ms", "1", d["clean"]], EXIT_FINDINGS),
        (["retention", "--retention-ms", "1", d["clean"]], EXIT_OK),
        (["retention", "--dry-run", d["other"]], EXIT_USAGE),
    ],
    "compact": lambda d: [
        (["compact", "--dry-run", d["other"]], EXIT_USAGE),
    ],
    "groups list": lambda d: [
        (["groups", "list", "--log-dir", d["clean"]], EXIT_OK),
        (["groups", "list", "--log-dir", d["other"]], EXIT_USAGE),
    ],
    "groups describe": lambda d: [
        (["groups", "describe", "--all-groups", "--log-dir", d["clean"]], EXIT_OK),
        (["groups", "describe", "--group", "nobody", "--log-dir", d["clean"]], EXIT_FINDINGS),
        (["groups", "describe", "--all-groups", "--log-dir", d["other"]], EXIT_USAGE),
    ],
    "topics describe": lambda d: [
        (["topics", "describe", "--log-dir", d["clean"]], EXIT_OK),
        (["topics", "describe", "--log-dir", d["other"]], EXIT_USAGE),
    ],
    "groups export": lambda d: [
        (["groups", "export", "--all-groups", "--log-dir", d["damaged"]], EXIT_OK),
        (["groups", "export", "--all-groups", "--log-dir", d["other"]], EXIT_USAGE),
    ],
    "fleet scan": lambda d: [
        (["fleet", "scan", d["other"]], EXIT_USAGE),
        (["fleet", "scan", d["pdir"]], EXIT_USAGE),
    ],
}

# commands that talk to a cluster: an unreachable one is "could not run"
UNREACHABLE_ZK = ["-z", "127.0.0.1:1", "--timeout", "0.3"]
ONLINE = {
    "zk ls": ["zk", "ls", "/", *UNREACHABLE_ZK],
    "zk check": ["zk", "check", *UNREACHABLE_ZK],
    "reassign list": ["reassign", "list", "--bootstrap-server", "127.0.0.1:1"],
    "users describe": ["users", "describe", "--bootstrap-server", "127.0.0.1:1"],
    "groups delete": ["groups", "delete", "--all-groups", "--bootstrap-server", "127.0.0.1:1"],
    "groups delete-offsets": [
        "groups",
        "delete-offsets",
        "--group",
        "g",
        "--topic",
        "t",
        "--bootstrap-server",
        "127.0.0.1:1",
    ],
    "groups reset-offsets": [
        "groups",
        "reset-offsets",
        "--group",
        "g",
        "--all-topics",
        "--to-earliest",
        "--bootstrap-server",
        "127.0.0.1:1",
    ],  # fmt: skip
    "groups list (cluster)": ["groups", "list", "--bootstrap-server", "127.0.0.1:1"],
    "leader-election": [
        "leader-election",
        "--election-type",
        "preferred",
        "--all-topic-partitions",
        "--bootstrap-server",
        "127.0.0.1:1",
    ],  # fmt: skip
    "health": ["health", "--bootstrap-server", "127.0.0.1:1"],
    "acls": ["acls", "--list", "--bootstrap-server", "127.0.0.1:1"],
    "topics list": ["topics", "list", "--bootstrap-server", "127.0.0.1:1"],
    "configs describe": [
        "configs",
        "describe",
        "--entity-type",
        "topics",
        "--entity-name",
        "t",
        "--bootstrap-server",
        "127.0.0.1:1",
    ],
    "configs alter (zk)": [
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "t",
        "--add-config",
        "retention.ms=1",
        "-z",
        "127.0.0.1:1",
        "--timeout",
        "0.3",
    ],  # fmt: skip
    "configs diff": ["configs", "diff", "--desired", "/dev/null", "--bootstrap-server", "127.0.0.1:1"],
    "topics create": ["topics", "create", "--topic", "t", "--bootstrap-server", "127.0.0.1:1"],
    "topics delete": ["topics", "delete", "--topic", "t", "--bootstrap-server", "127.0.0.1:1"],
    "topics alter": [
        "topics",
        "alter",
        "--topic",
        "t",
        "--partitions",
        "2",
        "--bootstrap-server",
        "127.0.0.1:1",
    ],
    "health (zk)": ["health", "-z", "127.0.0.1:1", "--timeout", "0.3"],
    "leader-election (zk)": [
        "leader-election",
        "--election-type",
        "preferred",
        "--all-topic-partitions",
        "-z",
        "127.0.0.1:1",
        "--timeout",
        "0.3",
    ],  # fmt: skip
}


@pytest.mark.parametrize("name", sorted(OFFLINE))
def test_offline_commands_keep_the_contract(name, dirs):
    for args, code in OFFLINE[name](dirs):
        res = run(*args)
        assert res.exit_code == code, (args, res.output[-2000:])
        if code == EXIT_USAGE:
            assert "Traceback" not in res.output


def test_compact_dry_run_answers_by_what_it_would_do(dirs):
    res = run("compact", "--dry-run", "--json", dirs["clean"])
    would = _summary(res)["compacted"] > 0
    assert res.exit_code == (EXIT_FINDINGS if would else EXIT_OK)
    assert run("compact", dirs["clean"]).exit_code == EXIT_OK
    again = run("compact", "--dry-run", "--json", dirs["clean"])
    assert again.exit_code == (EXIT_FINDINGS if _summary(again)["compacted"] else EXIT_OK)


@pytest.mark.parametrize("name", sorted(ONLINE))
def test_unreachable_cluster_is_could_not_run(name):
    res = run(*ONLINE[name])
    assert res.exit_code == EXIT_USAGE, res.output
    assert "Traceback" not in res.output


def test_damage_below_the_recovery_point_is_reported_not_nothing_to_do(dirs):
    """verify sees a CRC error below the recovery point; recover --dry-run must say so and
    point at --all instead of 'nothing to do', exit 0."""
    log_dir = dirs["damaged"]
    (log_dir / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 100\n")
    assert run("verify", log_dir).exit_code == EXIT_FINDINGS
    res = run("recover", "--dry-run", "--json", log_dir)
    assert res.exit_code == EXIT_FINDINGS
    out = res.stdout
    assert "below the recovery point" in out and "--all" in out
    assert _summary(res)["damage_below_recovery_point"] == 1


def test_a_crc_flip_keeps_positions_inside_the_file(dirs):
    seg = sorted((dirs["damaged"] / "t-0").glob("*.log"))[0]
    size = seg.stat().st_size
    res = run("verify", "--json", seg)
    for f in (json.loads(x) for x in res.stdout.splitlines()):
        if f.get("type") == "finding" and f.get("position") is not None:
            assert 0 <= f["position"] < size
            assert f["end"] is None or f["end"] <= size


def test_fail_on_defaults_agree():
    from kafkatool.commands.common import DEFAULT_FAIL_ON

    for cmd in (["verify"], ["fleet", "scan"]):
        assert f"[default: {DEFAULT_FAIL_ON}]" in run(*cmd, "--help").output.replace("\n", " ")
