"""Real clients other than librdkafka and kafka-python against ``kafkatool serve``: kafkajs
(tests/clients/js, installed by scripts/setup.sh) and aiokafka. Each file runs the shared client
matrix's scenarios (../shared/compat) that its client supports, on one serve of its own, with the
matrix's data sets and its byte-for-byte check (compat/common.py: make_dataset, verify,
check_transactions)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.broker.conftest import BrokerProcess
from tests.conftest import SHARED

COMMON = SHARED / "compat" / "common.py"

#: Kafka's own integration tests' group delay (0): a group's first member is not held 3 s
OVERRIDES = [
    "num.partitions=1",
    "group.initial.rebalance.delay.ms=0",
    "offsets.topic.num.partitions=3",
    "transaction.state.log.num.partitions=3",
]


@pytest.fixture(scope="session")
def compat():
    """The shared matrix's common.py (data sets, verify, check_transactions), as a module."""
    if not COMMON.exists():
        pytest.skip(f"the shared client matrix is not at {COMMON.parent}")
    spec = importlib.util.spec_from_file_location("compat_common", COMMON)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    """One serve for a test file: every scenario uses topics and groups of its own."""
    b = BrokerProcess(tmp_path_factory.mktemp("clients") / "data", extra=OVERRIDES).start()
    yield b
    b.stop()
