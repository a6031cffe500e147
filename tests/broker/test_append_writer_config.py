"""kafkatool.append.writer: true, false or auto (broker/server.append_writer_wanted), and a value
that is none of them refuses the start."""

from __future__ import annotations

import os

import pytest

from kafkatool.broker.config import BrokerConfig, ConfigError
from kafkatool.broker.server import append_writer_auto, append_writer_wanted


def config(*props: str) -> BrokerConfig:
    return BrokerConfig.load(None, ["log.dirs=/nonexistent", "listeners=PLAINTEXT://127.0.0.1:0", *props])


@pytest.mark.parametrize("value", ["maybe", "1", "on", ""])
def test_a_value_other_than_auto_true_or_false_is_refused(value):
    with pytest.raises(ConfigError, match="kafkatool.append.writer"):
        config(f"kafkatool.append.writer={value}").validate()


@pytest.mark.parametrize(
    ("value", "wanted"), [("true", True), ("TRUE", True), ("false", False), (" False ", False)]
)
def test_true_and_false_hold_whatever_the_cores(value, wanted):
    c = config(f"kafkatool.append.writer={value}", "kafkatool.processes=64")
    c.validate()
    assert append_writer_wanted(c) is wanted


@pytest.fixture
def cores():
    """Runs the test's thread on the given cores (the rule reads this thread's affinity)."""
    before = os.sched_getaffinity(0)

    def on(n: int) -> None:
        if len(before) < n:
            pytest.skip(f"needs {n} cores (what it could check on fewer, it did)")
        os.sched_setaffinity(0, sorted(before)[:n])

    yield on
    os.sched_setaffinity(0, before)


@pytest.mark.parametrize(
    ("cores", "processes", "on"),
    [
        (1, 1, False),
        (2, 1, False),
        (3, 1, False),
        (4, 1, True),
        (16, 1, True),
        (4, 2, False),
        (8, 2, True),
        (16, 4, True),
        (16, 5, False),
    ],
)
def test_auto_wants_four_cores_per_process(cores, processes, on):
    assert append_writer_auto(cores, processes) is on


def test_auto_is_the_default_and_reads_the_process_affinity(cores):
    assert config().get("kafkatool.append.writer") == "auto"
    cores(1)
    assert not append_writer_wanted(config())
    cores(2)
    assert not append_writer_wanted(config("kafkatool.append.writer=auto"))
    cores(4)
    assert append_writer_wanted(config())
    assert not append_writer_wanted(config("kafkatool.processes=2"))
