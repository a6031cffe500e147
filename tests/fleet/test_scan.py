"""A synthetic fleet (3 brokers, RF 2-3, 30 partitions, several segments each, every codec)
with injected damage, scanned by a real local Spark session: every injected problem is
found, and nothing else."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from kafkatool.assign.formats import parse_sizes
from kafkatool.forensics import verify as V

# findings only the fleet scan can make (it sees the assignment and consecutive segments)
FLEET_ONLY = {
    "orphaned_replica",
    "missing_replica",
    "offset_gap",
    "broker_id_overridden",
    "broker_id_unknown",
}


def _key(f):
    return (f["kind"], f["file"], f["position"])


def test_every_injected_problem_is_found_and_nothing_else(fleet, scanned):
    res, _out = scanned
    bit_seg, bit_pos = fleet.bit_flip
    cut_seg, cut_pos = fleet.truncated
    segs = V.segment_files(bit_seg.parent)
    after_bit = segs[segs.index(bit_seg) + 1]
    expected = {
        ("crc_mismatch", str(bit_seg), bit_pos),
        # verify's own consequence of a damaged non-final segment
        ("after_damaged_segment", str(after_bit), 0),
        ("truncated_tail", str(cut_seg), cut_pos),
        ("orphaned_replica", str(fleet.orphan), None),
        ("delete_dir", str(fleet.delete_dir), None),
    }
    assert {_key(f) for f in res.findings} == expected
    assert len(res.findings) == len(expected)
    by_kind = {f["kind"]: f for f in res.findings}
    assert by_kind["crc_mismatch"]["broker"] == 2 and by_kind["crc_mismatch"]["topic"] == "orders"
    assert by_kind["crc_mismatch"]["partition"] == 1
    assert by_kind["orphaned_replica"]["broker"] not in fleet.assignment[("clicks", 3)]
    # the diverging replica, against each of the others, at the offset where it diverged
    topic, part, odd, offset = fleet.divergence
    others = [b for b in fleet.assignment[(topic, part)] if b != odd]
    assert len(res.divergences) == len(others)
    for d in res.divergences:
        assert (d["topic"], d["partition"], d["offset"]) == (topic, part, offset)
        assert odd in d["brokers"] and set(d["brokers"]) - {odd} <= set(others)
        mine = d["brokers"].index(odd)
        assert d["epochs"][mine] == 7 and d["epochs"][1 - mine] == 1
        assert d["crcs"][0] != d["crcs"][1] and None not in d["crcs"]
    assert res.gaps == []
    s = res.summary
    assert (s["corrupt_segments"], s["divergent_partitions"], s["orphaned_replicas"]) == (2, 1, 1)
    assert s["errors"] == 2


def test_same_findings_as_verify_on_each_log_dir(fleet, scanned):
    """The fleet scan runs verify's checks: per log dir, verify_log_dir finds the same."""
    res, _out = scanned
    serial = set()
    segments = 0
    for d in fleet.all_log_dirs():
        for r in V.verify_log_dir(d):
            segments += r.kind == "log"
            serial |= {(f.kind, f.file, f.position, f.offset, f.severity) for f in r.findings}
    fleet_set = {
        (f["kind"], f["file"], f["position"], f["offset"], f["severity"])
        for f in res.findings
        if f["kind"] not in FLEET_ONLY
    }
    assert fleet_set == serial
    assert res.summary["segments"] == segments


def test_statistics_and_totals(fleet, scanned):
    res, _out = scanned
    s = res.summary
    assert s["partitions"] == 30
    assert s["brokers"] == 3 and s["log_dirs"] == 4
    # 71 copies: 10*3 + 10*2 + 10*2 + the orphan
    assert s["replicas"] == 71
    assert set(s["codecs"]) == {"none", "gzip", "snappy", "lz4", "zstd"}
    on_disk = sum(
        p.stat().st_size for d in fleet.all_log_dirs() for p in d.rglob("*.log") if "-delete" not in str(p)
    )
    assert s["bytes"] == on_disk
    assert sum(b["bytes"] for b in res.brokers) == on_disk
    assert {b["broker"]: (b["host"], b["rack"]) for b in res.brokers}[2] == ("kafka2.example", "rack-2")
    orders5 = next(p for p in res.partitions if (p["topic"], p["partition"]) == ("orders", 5))
    topic, part, odd, offset = fleet.divergence
    assert orders5["log_end_offsets"][str(odd)] == offset + 50
    clicks3 = next(p for p in res.partitions if (p["topic"], p["partition"]) == ("clicks", 3))
    assert clicks3["orphans"] and sorted(clicks3["replicas"]) == sorted(fleet.assignment[("clicks", 3)])


def test_parquet_tables(spark, fleet, scanned):
    res, out = scanned
    segs = spark.read.parquet(str(out / "segments"))
    assert segs.count() == res.summary["segments"]
    cols = set(segs.columns)
    for c in (
        "broker",
        "log_dir",
        "topic",
        "partition",
        "base_offset",
        "last_offset",
        "batches",
        "records",
        "bytes",
        "codecs",
        "min_timestamp",
        "max_timestamp",
        "producer_ids",
        "leader_epochs",
        "findings",
    ):
        assert c in cols
    total = segs.groupBy().sum("records", "bytes").collect()[0]
    assert (total[0], total[1]) == (res.summary["records"], res.summary["bytes"])
    bad = segs.filter("errors > 0").select("file").collect()
    assert {r.file for r in bad} == {str(fleet.bit_flip[0]), str(fleet.truncated[0])}
    row = segs.filter(segs.file == str(fleet.bit_flip[0])).collect()[0]
    assert row.findings[0].kind == "crc_mismatch" and row.findings[0].position == fleet.bit_flip[1]
    # producer ids of the idempotent partitions, both leader epochs
    o0 = segs.filter("topic = 'orders' and partition = 0").collect()
    assert {p for r in o0 for p in r.producer_ids} == {1000}
    assert {e for r in o0 for e in r.leader_epochs} == {0, 1}
    assert spark.read.parquet(str(out / "findings")).count() == len(res.findings)
    assert spark.read.parquet(str(out / "divergences")).count() == len(res.divergences)
    assert spark.read.parquet(str(out / "replicas")).count() == res.summary["replicas"]
    assert spark.read.parquet(str(out / "brokers")).count() == 3
    parts = spark.read.parquet(str(out / "partitions"))
    assert parts.count() == 30
    o5 = parts.filter("topic = 'orders' and partition = 5").collect()[0]
    assert sorted(o5.replicas) == sorted(fleet.assignment[("orders", 5)]) and len(o5.log_end_offsets) == 3
    assert spark.read.parquet(str(out / "gaps")).count() == 0
    assert json.loads((out / "summary.json").read_text())["segments"] == res.summary["segments"]


def test_partition_sizes_feed_reassign(fleet, scanned):
    res, out = scanned
    text = (out / "partition_sizes.jsonl").read_text()
    lines = [json.loads(x) for x in text.splitlines()]
    assert all(x["type"] == "partition_size" for x in lines)
    # one line per assigned replica; the orphan is left out
    assert len(lines) == 70
    assert Counter((x["topic"], x["partition"]) for x in lines)[("clicks", 3)] == 2
    sizes = parse_sizes(text)
    assert len(sizes) == 30
    pdir = fleet.partition_dirs[("orders", 7, 1)]
    assert sizes[("orders", 7)] == sum(p.stat().st_size for p in Path(pdir).glob("*.log"))
