"""`kafkatool recover`: reports, quarantine, salvage, --dry-run, --json, locked dirs, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.formats import checkpoint as ck
from kafkatool.formats import records as R
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log

runner = CliRunner()
CFG = LogConfig(segment_bytes=3_000, index_interval_bytes=500)


def run(*args):
    res = runner.invoke(app, ["recover", *map(str, args)])
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def lines(res):
    return [json.loads(x) for x in res.stdout.splitlines() if x.strip()]


def make(log_dir, name="t-0", n=30):
    d = log_dir / name
    log = Log(d, CFG)
    for i in range(n):
        log.append_as_leader(
            R.build_record_batch([R.SimpleRecord(b"v" * 300, b"k%d" % i, (), 1000 + i)]), leader_epoch=0
        )
    bases = [s.base_offset for s in log.segments]
    log.close()
    return d, bases


def snapshot_tree(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_clean_dir_exits_0(tmp_path):
    make(tmp_path)
    res = run(tmp_path, "--json", "--index-interval-bytes", 500)
    assert res.exit_code == 0, res.output
    (summary,) = lines(res)
    assert summary["type"] == "summary" and summary["clean"] and summary["partitions"] == 1


def test_dry_run_reports_exact_cut_and_changes_nothing(tmp_path):
    d, bases = make(tmp_path)
    victim = d / f"{bases[2]:020d}.log"
    data = bytearray(victim.read_bytes())
    data[800] = 0xEE
    victim.write_bytes(data)
    before = snapshot_tree(tmp_path)
    res = run(d, "--dry-run", "--json", "--index-interval-bytes", 500)
    assert res.exit_code == 1, res.output
    out = lines(res)
    (cut,) = [x for x in out if x["type"] == "cut"]
    assert cut["segment"] == str(victim) and cut["byte_range"][1] == len(data) and not cut["done"]
    assert cut["byte_range"][0] <= 800 < cut["byte_range"][1]
    drops = [x for x in out if x["type"] == "drop_segment"]
    assert sorted(x["base_offset"] for x in drops) == bases[3:]
    assert out[-1]["type"] == "summary" and out[-1]["dry_run"] and not out[-1]["clean"]
    assert snapshot_tree(tmp_path) == before
    # human view
    res = run(d, "--dry-run", "--index-interval-bytes", 500)
    assert res.exit_code == 1 and "would cut" in res.stdout and str(victim) in res.stdout


def test_recover_quarantines_salvages_and_is_then_clean(tmp_path):
    d, bases = make(tmp_path)
    (tmp_path / "recovery-point-offset-checkpoint").write_bytes(ck.encode_offset_checkpoint({("t", 0): 30}))
    victim = d / f"{bases[1]:020d}.log"
    data = bytearray(victim.read_bytes())
    data[800] ^= 1
    victim.write_bytes(data)
    # the checkpointed recovery point is past the damage: Kafka would not look, so nothing is
    # cut without --all, but the operator hears of it (issue 12: not "nothing to do", exit 0)
    res = run(tmp_path, "--json", "--index-interval-bytes", 500)
    assert res.exit_code == 1, res.output
    assert "below the recovery point" in res.stdout and "recover --all" in res.stdout
    assert not [x for x in lines(res) if x["type"] == "cut"]
    res = run(tmp_path, "--all", "--salvage", "--json", "--index-interval-bytes", 500)
    assert res.exit_code == 0, res.output  # a repair that succeeded
    out = lines(res)
    (cut,) = [x for x in out if x["type"] == "cut"]
    q = [x["file"] for x in out if x["type"] == "quarantined"]
    cut_file = next(f for f in q if ".cut-" in f)
    start, end = cut["byte_range"]
    assert open(cut_file, "rb").read() == bytes(data[start:end])
    assert "kafkatool-quarantine" in cut_file and os.path.dirname(os.path.dirname(cut_file)).endswith(
        "t-0/kafkatool-quarantine"
    )
    (salv,) = [x for x in out if x["type"] == "salvaged"]
    got = list(R.iter_batches(open(salv["file"], "rb").read()))
    assert got and all(b.is_valid() for b in got) and got[0].base_offset > cut["next_offset"]
    # the recovery point checkpoint was lowered to the new log end
    rp = ck.decode_offset_checkpoint((tmp_path / "recovery-point-offset-checkpoint").read_bytes())
    assert rp == {("t", 0): cut["next_offset"]}
    assert os.path.getsize(victim) == start
    res = run(tmp_path, "--all", "--json", "--index-interval-bytes", 500)
    assert res.exit_code == 0, res.output
    # dump-log reads the salvage file as a segment
    dump = runner.invoke(app, ["dump-log", salv["file"]])
    assert dump.exit_code in (0, 1) and "baseOffset" in dump.stdout


def test_refuses_a_locked_dir(tmp_path):
    d, bases = make(tmp_path)
    with open(d / f"{bases[-1]:020d}.log", "ab") as f:
        f.write(b"\x00\x01garbage")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
            import sys
            from kafkatool.log import lock
            lock.acquire(sys.argv[1]); print("locked", flush=True); sys.stdin.readline()
            """
            ),
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        res = run(d, "--all")
        assert res.exit_code == 2
        assert "locked by a running process" in res.stderr and str(tmp_path) in res.stderr
        assert res.stderr.count("\n") == 1
        res = run(d, "--all", "--dry-run", "--json")
        assert res.exit_code == 1 and any(x["type"] == "warning" for x in lines(res))
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


def test_bad_path_is_a_usage_error(tmp_path):
    res = run(tmp_path / "nope")
    assert res.exit_code == 2 and "kafkatool: error:" in res.stderr
