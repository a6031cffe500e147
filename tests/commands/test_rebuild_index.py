"""`kafkatool rebuild-index`: differences reported, files replaced atomically, exit codes."""

from __future__ import annotations

import json
import os

from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.formats import records as R
from kafkatool.log.config import LogConfig
from kafkatool.log.log import ORIGIN_COORDINATOR, Log

runner = CliRunner()
CFG = LogConfig(segment_bytes=6_000, index_interval_bytes=1000)


def run(*args):
    res = runner.invoke(app, ["rebuild-index", *map(str, args)])
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def lines(res):
    return [json.loads(x) for x in res.stdout.splitlines() if x.strip()]


def make(log_dir):
    d = log_dir / "t-0"
    log = Log(d, CFG)
    for i in range(40):
        log.append_as_leader(
            R.build_record_batch([R.SimpleRecord(b"v" * 400, None, (), 1000 + i)]), leader_epoch=0
        )
    pid_batch = R.build_record_batch(
        [R.SimpleRecord(b"t")], producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    log.append_as_leader(pid_batch, 0)
    log.append_as_leader(
        R.build_control_batch(R.ABORT, producer_id=9, producer_epoch=0), 0, origin=ORIGIN_COORDINATOR
    )
    bases = [s.base_offset for s in log.segments]
    log.close()
    return d, bases


def test_matching_indexes_exit_0(tmp_path):
    make(tmp_path)
    res = run(tmp_path, "--json", "--index-interval-bytes", 1000)
    assert res.exit_code == 0, res.output
    (summary,) = lines(res)
    assert summary["clean"] and summary["segments"] >= 3 and summary["different"] == 0


def test_damaged_indexes_are_reported_and_replaced(tmp_path):
    d, bases = make(tmp_path)
    idx = d / f"{bases[0]:020d}.index"
    good = idx.read_bytes()
    bad = bytearray(good)
    bad[12] ^= 0x10  # the position of the second entry
    idx.write_bytes(bytes(bad) + bytes(80))  # and an untrimmed zero tail
    tidx = d / f"{bases[1]:020d}.timeindex"
    good_t = tidx.read_bytes()
    os.remove(tidx)
    txn = d / f"{bases[-1]:020d}.txnindex"
    good_txn = txn.read_bytes()
    assert len(good_txn) == 34
    txn.write_bytes(b"")
    res = run(d, "--dry-run", "--json", "--index-interval-bytes", 1000)
    assert res.exit_code == 1, res.output
    out = lines(res)
    diffs = {x["file"]: x for x in out if x["type"] == "index_difference"}
    assert diffs[str(idx)]["first_difference_slot"] == 1 and not diffs[str(idx)]["replaced"]
    assert diffs[str(tidx)]["exists"] is False
    assert diffs[str(txn)]["rebuilt_entries"] == 1
    assert idx.read_bytes() == bytes(bad) + bytes(80)  # dry run
    res = run(d, "--index-interval-bytes", 1000)
    assert res.exit_code == 0 and "replaced" in res.stdout  # the rebuild succeeded
    assert idx.read_bytes() == good and tidx.read_bytes() == good_t and txn.read_bytes() == good_txn
    assert not [p for p in os.listdir(d) if p.endswith(".tmp")]
    res = run(d, "--json", "--index-interval-bytes", 1000)
    assert res.exit_code == 0


def test_damaged_log_is_reported_not_changed(tmp_path):
    d, bases = make(tmp_path)
    seg = d / f"{bases[0]:020d}.log"
    data = bytearray(seg.read_bytes())
    data[3000] ^= 0xFF
    seg.write_bytes(data)
    res = run(d, "--json", "--index-interval-bytes", 1000)
    assert res.exit_code == 1
    (dmg,) = [x for x in lines(res) if x["type"] == "log_damage"]
    assert dmg["segment"] == str(seg) and dmg["valid_bytes"] <= 3000 and "recover" in dmg["hint"]
    assert seg.read_bytes() == bytes(data)
