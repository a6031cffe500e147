"""kafkatool users (issue 14): SCRAM credentials through a cluster and offline on a stopped
broker's log dir, proven by a real client authenticating with what the command wrote."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from tests.broker.conftest import BrokerProcess, free_port

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _opts(plain: int, sasl: int) -> list[str]:
    return [
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
        "num.partitions=1",
    ]


def _authenticates(sasl_port: int, mech: str, user: str, password: str) -> bool:
    """A real client's SCRAM authentication: its metadata request succeeds only after it; a
    refused client is known by the SASL error librdkafka reports (it would retry until its
    timeout)."""
    from tests.client_checks import metadata_or_refusal

    conf = {
        "bootstrap.servers": f"127.0.0.1:{sasl_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mech,
        "sasl.username": user,
        "sasl.password": password,
    }
    return metadata_or_refusal(conf, "SASL authentication error", timeout=8) is not None


@pytest.fixture
def stopped_dir(tmp_path):
    plain, sasl = free_port(), free_port()
    b = BrokerProcess(tmp_path / "data", port=plain, extra=_opts(plain, sasl)).start()
    b.stop()
    return tmp_path / "data", plain, sasl


def test_offline_alter_then_a_client_authenticates(stopped_dir):
    data, plain, sasl = stopped_dir
    add = "SCRAM-SHA-256=[iterations=8192,password=dora-secret],SCRAM-SHA-512=[password=dora-secret]"
    dry = run("users", "alter", "--log-dir", data, "--user", "dora", "--add-config", add, "--dry-run")
    assert dry.exit_code == 1, dry.output
    assert run("users", "describe", "--log-dir", data, "--user", "dora").exit_code == 1  # nothing written
    res = run("users", "alter", "--log-dir", data, "--user", "dora", "--add-config", add)
    assert res.exit_code == 0 and "Completed updating config for user dora." in res.output, res.output
    d = run("users", "describe", "--log-dir", data, "--json")
    assert d.exit_code == 0, d.output
    (row,) = [json.loads(x) for x in d.stdout.splitlines()]
    assert row["user"] == "dora" and row["credentials"] == [
        {"mechanism": "SCRAM-SHA-256", "iterations": 8192},
        {"mechanism": "SCRAM-SHA-512", "iterations": 4096},
    ]
    assert "secret" not in d.output  # never a password or a key
    b = BrokerProcess(data, port=plain, extra=_opts(plain, sasl)).start()
    try:
        assert _authenticates(sasl, "SCRAM-SHA-256", "dora", "dora-secret")
        assert not _authenticates(sasl, "SCRAM-SHA-512", "dora", "wrong")
        # the running broker holds the dir: an offline change is refused, one line, exit 2
        busy = run("users", "alter", "--log-dir", data, "--user", "dora", "--delete-config", "SCRAM-SHA-512")
        assert busy.exit_code == 2 and "locked by a running process" in busy.output
    finally:
        b.stop()


def test_live_alter_describe_delete(tmp_path):
    plain, sasl = free_port(), free_port()
    b = BrokerProcess(tmp_path / "data", port=plain, extra=_opts(plain, sasl)).start()
    try:
        boot = ["--bootstrap-server", b.bootstrap]
        res = run(
            "users", "alter", *boot, "--user", "erin", "--add-config", "SCRAM-SHA-512=[password=erin-pw]"
        )
        assert res.exit_code == 0, res.output
        assert _authenticates(sasl, "SCRAM-SHA-512", "erin", "erin-pw")
        d = run("users", "describe", *boot, "--user", "erin")
        assert (
            "SCRAM credential configs for user-principal 'erin' are SCRAM-SHA-512=iterations=4096" in d.output
        )
        assert (
            run("users", "alter", *boot, "--user", "erin", "--delete-config", "SCRAM-SHA-512").exit_code == 0
        )
        gone = run("users", "describe", *boot, "--user", "erin", "--json")
        assert gone.exit_code == 1 and json.loads(gone.stdout)["error_code"] == 91  # RESOURCE_NOT_FOUND
        assert not _authenticates(sasl, "SCRAM-SHA-512", "erin", "erin-pw")
        too_few = run(
            "users", "alter", *boot, "--user", "x", "--add-config", "SCRAM-SHA-256=[iterations=10,password=p]"
        )
        assert too_few.exit_code == 1 and "Too few iterations" in too_few.output
    finally:
        b.stop()


@pytest.mark.parametrize(
    "args",
    [
        ["users", "describe"],  # no source
        [
            "users",
            "alter",
            "--user",
            "u",
            "--bootstrap-server",
            "127.0.0.1:1",
            "--add-config",
            "SCRAM-SHA-1=[password=p]",
        ],
        [
            "users",
            "alter",
            "--user",
            "u",
            "--bootstrap-server",
            "127.0.0.1:1",
            "--add-config",
            "SCRAM-SHA-256=[iterations=8]",
        ],
        ["users", "alter", "--user", "u", "--bootstrap-server", "127.0.0.1:1", "--delete-config", "MD5"],
        ["users", "describe", "--bootstrap-server", "127.0.0.1:1"],  # unreachable
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, tmp_path):
    res = run(*args)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output


def test_a_dir_without_kafkatool_metadata_is_refused(tmp_path):
    res = run("users", "describe", "--log-dir", tmp_path)
    assert res.exit_code == 2 and "ZooKeeper" in res.output
