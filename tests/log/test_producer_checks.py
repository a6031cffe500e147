"""Producer state lives in the log (issue 12): Log.append_as_leader with Kafka's CLIENT origin
checks duplicates, epochs and sequences (UnifiedLog.analyzeAndValidateProducerState,
ProducerAppendInfo, ProducerStateEntry.findDuplicateBatch); coordinator appends check only a
marker's producer and coordinator epochs; the state survives a restart through the producer
snapshot."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest

from kafkatool.formats import records as R
from kafkatool.log.config import LogConfig
from kafkatool.log.log import ORIGIN_COORDINATOR, Log
from kafkatool.log.producer_state import ProducerStateError
from tests.log.logtest_util import all_records, batch

PID = 42


def idem(seq: int, n: int = 1, epoch: int = 0, **kw) -> bytes:
    # timestamps of now: a producer idle for producer.id.expiration.ms is forgotten at load
    return batch(n, pid=PID, epoch=epoch, seq=seq, ts=int(time.time() * 1000), **kw)


@pytest.fixture
def log(tmp_path):
    lg = Log(tmp_path / "t-0", LogConfig())
    yield lg
    lg.close()


def test_retry_of_any_of_the_last_five_batches_returns_the_original_offsets(log):
    infos = [log.append_as_leader(idem(seq, 2), 0) for seq in range(0, 14, 2)]  # 7 batches, offsets 0..13
    assert log.log_end_offset == 14
    for i in range(2, 7):  # the last five
        dup = log.append_as_leader(idem(2 * i, 2), 0)
        assert dup.duplicate and (dup.first_offset, dup.last_offset) == (
            infos[i].first_offset,
            infos[i].last_offset,
        )
    assert log.log_end_offset == 14  # nothing appended
    # older than five batches: not recognised, and out of sequence
    with pytest.raises(ProducerStateError) as exc:
        log.append_as_leader(idem(0, 2), 0)
    assert exc.value.kind == "out_of_order_sequence"


def test_sequence_gap_and_old_epoch_are_rejected(log):
    log.append_as_leader(idem(0), 0)
    with pytest.raises(ProducerStateError) as exc:
        log.append_as_leader(idem(5), 0)
    assert exc.value.kind == "out_of_order_sequence"
    log.append_as_leader(idem(0, epoch=1), 0)  # a bumped epoch starts at 0
    with pytest.raises(ProducerStateError) as exc:
        log.append_as_leader(idem(1, epoch=0), 0)
    assert exc.value.kind == "invalid_producer_epoch"
    with pytest.raises(ProducerStateError) as exc:
        log.append_as_leader(idem(3, epoch=2), 0)  # a new epoch must start at 0
    assert exc.value.kind == "out_of_order_sequence"
    assert log.log_end_offset == 2


def test_unknown_producer_may_start_anywhere_and_sequences_wrap(log):
    log.append_as_leader(idem(0x7FFFFFFF - 1, 2), 0)  # sequences ..., 2^31-2, 2^31-1
    log.append_as_leader(idem(0), 0)  # wraps to 0
    assert log.log_end_offset == 3


def test_duplicate_detected_after_a_restart(tmp_path):
    d = tmp_path / "t-0"
    lg = Log(d, LogConfig())
    first = lg.append_as_leader(idem(0, 3), 0)
    lg.close()
    lg = Log(d, LogConfig(), had_clean_shutdown=True, recovery_point=3)
    dup = lg.append_as_leader(idem(0, 3), 0)
    assert dup.duplicate and dup.first_offset == first.first_offset
    lg.append_as_leader(idem(3), 0)
    assert [o for o, _ in all_records(lg)] == [0, 1, 2, 3]
    lg.close()


def test_coordinator_appends_are_not_checked(log):
    log.append_as_leader(idem(0, txn=True), 0)
    marker = R.build_control_batch(
        R.COMMIT, producer_id=PID, producer_epoch=0, coordinator_epoch=0, timestamp=5
    )
    log.append_as_leader(marker, 0, origin=ORIGIN_COORDINATOR)
    # a marker with a bumped epoch fences the old epoch for clients (no broker-side copy)
    bumped = R.build_control_batch(
        R.ABORT, producer_id=PID, producer_epoch=3, coordinator_epoch=0, timestamp=6
    )
    log.append_as_leader(bumped, 0, origin=ORIGIN_COORDINATOR)
    with pytest.raises(ProducerStateError) as exc:
        log.append_as_leader(idem(1, epoch=0), 0)
    assert exc.value.kind == "invalid_producer_epoch"


def test_a_marker_from_a_fenced_coordinator_or_epoch_is_refused(log):
    """ProducerAppendInfo.appendEndTxnMarker: the coordinator epoch of a marker may not go
    back (a zombie coordinator after a failover), nor may the producer epoch."""
    log.append_as_leader(idem(0, txn=True, epoch=2), 0)
    commit = R.build_control_batch(
        R.COMMIT, producer_id=PID, producer_epoch=2, coordinator_epoch=5, timestamp=5
    )
    log.append_as_leader(commit, 0, origin=ORIGIN_COORDINATOR)
    end = log.log_end_offset
    log.append_as_leader(idem(1, txn=True, epoch=2), 0)
    zombie = R.build_control_batch(
        R.ABORT, producer_id=PID, producer_epoch=2, coordinator_epoch=4, timestamp=6
    )
    with pytest.raises(ProducerStateError) as exc:
        log.append_as_leader(zombie, 0, origin=ORIGIN_COORDINATOR)
    assert exc.value.kind == "coordinator_fenced"
    old_epoch = R.build_control_batch(
        R.ABORT, producer_id=PID, producer_epoch=1, coordinator_epoch=5, timestamp=6
    )
    with pytest.raises(ProducerStateError) as exc:
        log.append_as_leader(old_epoch, 0, origin=ORIGIN_COORDINATOR)
    assert exc.value.kind == "invalid_producer_epoch"
    assert log.log_end_offset == end + 1  # nothing of either was written
    # the current coordinator (same or newer epoch) still writes
    log.append_as_leader(
        R.build_control_batch(R.ABORT, producer_id=PID, producer_epoch=2, coordinator_epoch=6, timestamp=7),
        0,
        origin=ORIGIN_COORDINATOR,
    )
    assert log.log_end_offset == end + 2


BROKER = Path(__file__).resolve().parents[2] / "kafkatool" / "broker"


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_handlers_and_coordinators_never_import_the_server():
    """Handlers depend on the engine and the coordinators, never on server; the coordinators
    never on the handlers (issue 12's import cycles), function-local imports included."""
    bad = []
    for sub in ("handlers", "txn", "group"):
        for path in (BROKER / sub).rglob("*.py"):
            mods = _imports(path)
            if any(m == "kafkatool.broker.server" or m.startswith("kafkatool.broker.server.") for m in mods):
                bad.append(f"{path.name} imports broker.server")
            if sub != "handlers" and any(m.startswith("kafkatool.broker.handlers") for m in mods):
                bad.append(f"{sub}/{path.name} imports broker.handlers")
    assert bad == []
