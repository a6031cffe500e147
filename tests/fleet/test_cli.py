"""``kafkatool fleet scan`` end to end, in-process (it reuses the suite's Spark session)."""

from __future__ import annotations

import json
import shutil

from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.commands.common import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE

runner = CliRunner()


def _lines(out: str) -> list[dict]:
    return [json.loads(x) for x in out.splitlines() if x.strip()]


def test_json_lines_and_exit_1_on_damaged_fleet(spark, fleet, tmp_path):
    r = runner.invoke(app, ["fleet", "scan", "--inventory", str(fleet.inventory_path), "--json", "--quick"])
    assert r.exit_code == EXIT_FINDINGS, r.output
    objs = _lines(r.stdout)
    types = [o["type"] for o in objs]
    # findings, then divergences, then partition sizes, the summary last
    order = {"finding": 0, "divergence": 1, "partition_size": 2, "summary": 3}
    assert [order[t] for t in types] == sorted(order[t] for t in types)
    assert types[-1] == "summary" and types.count("summary") == 1
    f = next(o for o in objs if o["type"] == "finding" and o["kind"] == "crc_mismatch")
    assert set(f) >= {"broker", "file", "position", "end", "offset", "kind", "message"}
    assert f["broker"] == 2 and f["position"] == fleet.bit_flip[1]
    d = next(o for o in objs if o["type"] == "divergence")
    assert d["offset"] == fleet.divergence[3] and len(d["brokers"]) == 2
    assert sum(t == "partition_size" for t in types) == 70
    assert spark.sparkContext._jsc is not None  # the suite's session was left running


def test_clean_log_dirs_exit_0_broker_from_meta_properties(spark, tmp_path):
    from fleet.fleetgen import build_fleet

    f = build_fleet(tmp_path / "clean", topics=[("t", 2, 2)], batches=6, damage=False)
    dirs = [str(d) for d in f.all_log_dirs()]
    r = runner.invoke(app, ["fleet", "scan", *dirs, "--json"])
    assert r.exit_code == EXIT_OK, r.output
    objs = _lines(r.stdout)
    assert [o["type"] for o in objs if o["type"] in ("finding", "divergence")] == []
    sizes = [o for o in objs if o["type"] == "partition_size"]
    # brokers named by meta.properties: broker.id (ZooKeeper) on 1 and 2, node.id (KRaft) on 3
    assert sorted({o["broker"] for o in sizes}) == sorted({b for r in f.assignment.values() for b in r})
    assert objs[-1]["findings"] == 0 and objs[-1]["partitions"] == 2


def test_human_view_and_inventory_override(spark, tmp_path):
    from fleet.fleetgen import build_fleet

    f = build_fleet(tmp_path / "f", topics=[("t", 2, 2)], batches=6, segment_bytes=2048, damage=False)
    # a segment disappears from the middle of a partition: an offset gap
    pdir = f.partition_dirs[("t", 0, f.assignment[("t", 0)][0])]
    logs = sorted(pdir.glob("*.log"))
    assert len(logs) >= 3
    for suffix in (".log", ".index", ".timeindex"):
        p = logs[1].with_suffix(suffix)
        if p.exists():
            p.unlink()
    inv = json.loads(f.inventory(tmp_path / "fleet.json").read_text())
    moved = inv["brokers"]["2"]
    inv["brokers"]["7"] = moved  # the inventory says broker 7 owns broker 2's dirs
    del inv["brokers"]["2"]
    del inv["assignment"]
    (tmp_path / "fleet.json").write_text(json.dumps(inv))
    out = tmp_path / "out"
    r = runner.invoke(
        app, ["fleet", "scan", "-i", str(tmp_path / "fleet.json"), "-o", str(out), "--fail-on", "warning"]
    )
    assert r.exit_code == EXIT_FINDINGS, r.output
    text = r.stdout
    assert "offset_gap" in text and "broker_id_overridden" in text
    assert "fleet scan:" in text and "1 offset gaps" in text
    # the gap is a warning, not corruption: --fail-on error passes (the default, warning, as verify's, fails)
    r2 = runner.invoke(
        app, ["fleet", "scan", "-i", str(tmp_path / "fleet.json"), "--json", "--fail-on", "error"]
    )
    assert r2.exit_code == EXIT_OK, r2.output
    gap = next(o for o in _lines(r2.stdout) if o.get("kind") == "offset_gap")
    assert gap["file"] == str(logs[2]) and gap["severity"] == "warning"
    sizes = [o for o in _lines(r2.stdout) if o["type"] == "partition_size"]
    assert 7 in {o["broker"] for o in sizes} and 2 not in {o["broker"] for o in sizes}
    assert (out / "gaps").is_dir() and (out / "partition_sizes.jsonl").is_file()


def test_bad_input_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "fleet.json"
    bad.write_text('{"brokers": {"1": {"log_dirs": [}}')
    r = runner.invoke(app, ["fleet", "scan", "-i", str(bad)])
    assert r.exit_code == EXIT_USAGE
    assert r.stderr.startswith("kafkatool: error: ") and "not valid JSON" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = runner.invoke(app, ["fleet", "scan", str(tmp_path / "nope")])
    assert r.exit_code == EXIT_USAGE and "nope" in r.stderr
    r = runner.invoke(app, ["fleet", "scan"])
    assert r.exit_code == EXIT_USAGE
    shutil.rmtree(tmp_path)


def test_job_module_entry_point(spark, tmp_path, capsys):
    """What spark-submit runs: kafkatool.fleet.job main(), JSON lines on stdout."""
    from fleet.fleetgen import build_fleet

    from kafkatool.fleet import job

    f = build_fleet(tmp_path / "f", topics=[("t", 1, 3)], batches=4, damage=False)
    code = job.main([str(d) for d in f.all_log_dirs()] + ["--quick"])
    objs = _lines(capsys.readouterr().out)
    assert code == 0 and objs[-1]["type"] == "summary" and objs[-1]["replicas"] == 3
    assert [o["broker"] for o in objs if o["type"] == "partition_size"] == [1, 2, 3]


def test_a_refused_stored_topic_config_is_a_finding_row(spark, tmp_path):
    """A KRaft dir whose metadata log stores cleanup.policy=bogus for a topic: the scan's finding
    row names the topic, the record's file and offset and the refused value (exit 1: a broker
    does not start with this dir)."""
    from kafkatool.log import topic_settings as ts
    from tests.broker.test_topic_config_sources import write_kraft_dir

    d = tmp_path / "kraft"
    write_kraft_dir(d, "events", {"cleanup.policy": "bogus"})
    r = runner.invoke(app, ["fleet", "scan", str(d), "--json"])
    assert r.exit_code == EXIT_FINDINGS, r.output
    (f,) = [o for o in _lines(r.stdout) if o["type"] == "finding"]
    assert (f["broker"], f["log_dir"], f["topic"], f["partition"], f["kind"], f["severity"]) == (
        1,
        str(d),
        "events",
        None,
        "topic_config_refused",
        "error",
    )
    assert (f["file"], f["offset"], f["position"]) == (
        str(d / ts.CLUSTER_METADATA_DIR / "00000000000000000000.log"),
        1,
        0,
    )
    assert "Invalid value bogus for configuration cleanup.policy" in f["message"]
