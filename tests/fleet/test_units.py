"""The fleet scan's pieces without Spark: inventory, listing, the per-segment task,
aggregation, the replica comparison and the package zip."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import zipfile

import pytest

from kafkatool.fleet import aggregate as A
from kafkatool.fleet import inventory as I
from kafkatool.fleet import scan as S
from kafkatool.fleet.package import build_zip


def test_inventory_forms_and_errors():
    inv = I.parse_inventory(
        '{"brokers": [{"id": 1, "host": "h1", "rack": "r1", "log_dirs": ["/a", "/b"]}, '
        '{"id": "2", "log.dirs": "/c,/d"}], "assignment": {"partitions": '
        '[{"topic": "t", "partition": 0, "replicas": [1, 2]}]}}'
    )
    assert [(d.path, d.broker) for d in inv.log_dirs] == [("/a", 1), ("/b", 1), ("/c", 2), ("/d", 2)]
    assert inv.hosts[1] == ("h1", "r1") and inv.assignment == {("t", 0): [1, 2]}
    with pytest.raises(I.InventoryError) as e:
        I.parse_inventory('{"brokers": {"x": {"log_dirs": ["/a"]}}}')
    assert "integer broker id" in str(e.value)
    with pytest.raises(I.InventoryError, match="also listed"):
        I.parse_inventory('{"brokers": {"1": {"log_dirs": ["/a"]}, "2": {"log_dirs": ["/a"]}}}')
    with pytest.raises(I.InventoryError, match="non-empty list"):
        I.parse_inventory('{"brokers": {"1": {"log_dirs": []}}}')
    with pytest.raises(I.InventoryError) as e:
        I.parse_inventory('{"brokers": ')
    assert e.value.position == 12


def _row(base, first, last, *, size=100, valid_end=None, batches=1, damaged=(), errors=0, name=None):
    return {
        "file": f"/d/t-0/{name or f'{base:020d}'}.log",
        "base_offset": base,
        "first_offset": first,
        "last_offset": last,
        "batches": batches,
        "records": 0 if last is None else last - first + 1,
        "bytes": size,
        "valid_end": size if valid_end is None else valid_end,
        "min_timestamp": None,
        "max_timestamp": None,
        "errors": errors,
        "epoch_starts": [],
        "damaged": list(damaged),
    }


def test_summarize_replica_gaps_overlaps_and_damage():
    rows = [_row(200, 200, 299), _row(0, 0, 99), _row(100, 100, 149), _row(300, 290, 399)]
    s = A.summarize_replica("t", 0, 1, "/d", rows)
    kinds = sorted(f["kind"] for f in s.findings)
    # 150..199 missing between segments 100 and 200; segment 300 starts inside segment 200
    assert kinds == ["offset_gap", "segment_overlap"]
    assert s.gaps[0]["from_offset"] == 150 and s.gaps[0]["to_offset"] == 199 and not s.gaps[0]["compacted"]
    assert (s.first_offset, s.last_offset, s.segments) == (0, 399, 4)
    assert s.unknown == [(150, 199)]  # the other copies' batches there are not a divergence
    # compacted partitions have gaps by design: a note, not a warning
    s = A.summarize_replica("t", 0, 1, "/d", rows[:3], cleaner_offset=150)
    assert [f["severity"] for f in s.findings] == ["info"]
    # a truncated tail in a middle segment: the next one is flagged, no gap, offsets unknown until it
    rows = [_row(0, 0, 49, size=100, valid_end=60, damaged=[(49, None)], errors=1), _row(100, 100, 199)]
    s = A.summarize_replica("t", 0, 1, "/d", rows)
    assert [f["kind"] for f in s.findings] == ["after_damaged_segment"] and not s.gaps
    assert s.unknown == [(50, 99)] and s.corrupt_segments == 1
    s = A.summarize_replica("t", 0, 1, "/d", [_row(0, 0, 49, damaged=[(49, None)], errors=1)])
    assert s.unknown == [(50, math.inf)]


def test_epochs_vs_checkpoint(tmp_path):
    from kafkatool.formats.checkpoint import encode_leader_epoch_checkpoint

    ck = tmp_path / "leader-epoch-checkpoint"
    ck.write_bytes(encode_leader_epoch_checkpoint([(0, 0), (1, 60), (2, 150), (3, 170)]))
    rows = [_row(0, 0, 99), _row(100, 100, 199)]
    rows[0]["epoch_starts"] = [[0, 0], [1, 60]]
    rows[1]["epoch_starts"] = [[1, 100], [4, 150], [3, 160]]
    s = A.summarize_replica("t", 0, 1, "/d", rows, [], str(ck))
    # epoch 4 is not in the checkpoint; epoch 3 starts before the checkpoint says it does
    assert [(f["kind"], f["offset"]) for f in s.findings] == [
        ("leader_epoch_missing", 150),
        ("leader_epoch_mismatch", 160),
    ]


def _d(base, last, epoch, crc):
    return (base, last, epoch, crc)


def test_compare_replicas():
    same = [_d(0, 9, 0, 11), _d(10, 19, 0, 12), _d(20, 29, 1, 13)]
    ext = A.ReplicaExtent(0, 29, [])
    assert A.compare_replicas(same, list(same), ext, ext) is None
    # diverges at 20: another epoch and CRC
    other = same[:2] + [_d(20, 24, 2, 99)]
    d = A.compare_replicas(same, other, ext, A.ReplicaExtent(0, 24, []))
    assert d["offset"] == 20 and d["a"]["epoch"] == 1 and d["b"]["epoch"] == 2 and d["b"]["crc"] == 99
    # only the common range counts: a longer or a retention-trimmed copy agrees
    assert A.compare_replicas(same, same[:2], ext, A.ReplicaExtent(0, 19, [])) is None
    assert A.compare_replicas(same, same[1:], ext, A.ReplicaExtent(10, 29, [])) is None
    # a batch missing on one side (not damage): divergence
    d = A.compare_replicas(same, [same[0], same[2]], ext, ext)
    assert d["offset"] == 10 and d["b"]["base_offset"] == 20
    # ... unless that copy cannot vouch for those offsets (its damage is reported as corruption)
    assert A.compare_replicas(same, [same[0], same[2]], ext, A.ReplicaExtent(0, 29, [(10, 19)])) is None
    # below the cleaner checkpoint, same-epoch batches may differ (each broker compacts on its own)
    cleaned = [_d(0, 7, 0, 21), same[2]]
    assert A.compare_replicas(same, cleaned, ext, A.ReplicaExtent(0, 29, [], cleaner_offset=20)) is None
    d = A.compare_replicas(same, cleaned, ext, ext)
    assert d is not None and d["offset"] == 0
    # ... but not a batch of another epoch at the same offset
    other_epoch = [_d(0, 9, 5, 11), *same[1:]]
    d = A.compare_replicas(same, other_epoch, ext, A.ReplicaExtent(0, 29, [], cleaner_offset=20))
    assert d["offset"] == 0 and d["b"]["epoch"] == 5


def test_list_and_scan_segment_match_verify(tmp_path):
    from fleet.fleetgen import build_fleet

    from kafkatool.forensics import verify as V

    f = build_fleet(tmp_path / "f", topics=[("t", 1, 1)], batches=8, damage=False)
    log_dir = (
        f.all_log_dirs()[0]
        if (f.all_log_dirs()[0] / "t-0").exists()
        else f.partition_dirs[("t", 0, 1)].parent
    )
    listing = S.list_log_dir(str(log_dir))
    assert listing.broker == listing.meta_broker is not None and listing.findings == []
    assert [t.path for t in listing.segments] == [str(p) for p in V.segment_files(log_dir / "t-0")]
    assert [t.active for t in listing.segments][-1] is True and not listing.segments[0].active
    # the override wins, noted
    assert S.list_log_dir(str(log_dir), 42).findings[0]["kind"] == "broker_id_overridden"
    task = listing.segments[0]
    row, windows = S.scan_segment(task, window=5)
    seg = V.verify_segment(task.path)
    assert row["batches"] == seg.batches and row["bytes"] == seg.size and row["findings"] == []
    digests = [d for _w, blob in windows for d in S.unpack_digests(blob)]
    assert len(digests) == seg.batches and [w for w, _ in windows] == sorted({d[0] // 5 for d in digests})
    assert all(d[2] in (0, 1) for d in digests)
    # damage the segment: the same finding as verify, and the damaged batch has no digest
    data = bytearray(open(task.path, "rb").read())
    data[100] ^= 1
    open(task.path, "wb").write(data)
    row, windows = S.scan_segment(task)
    assert [x["kind"] for x in row["findings"]] == [x.kind for x in V.verify_segment(task.path).findings]
    assert row["errors"] == 1 and sum(len(S.unpack_digests(b)) for _w, b in windows) == seg.batches - 1


def test_zip_imports_in_a_fresh_interpreter(tmp_path):
    z = build_zip(tmp_path / "kafkatool.zip")
    names = zipfile.ZipFile(z).namelist()
    assert "kafkatool/fleet/job.py" in names and "kafkatool/__init__.py" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    # no compiled hot path: a zip cannot load a binary
    assert not any(n.startswith("kafkatool/_accel/") for n in names)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "import kafkatool.fleet.job, kafkatool.fleet.scan, kafkatool.forensics.verify; "
        "import kafkatool; print(kafkatool.__file__)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(z)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip().startswith(str(z)), out.stdout


def test_segment_gone_between_listing_and_scan_is_a_finding(tmp_path):
    rep = S.Replica(1, str(tmp_path), "t", 0)
    task = S.SegmentTask(rep, str(tmp_path / "t-0" / "00000000000000000000.log"), 10, True, (".index",))
    row, windows = S.scan_segment(task)
    assert windows == [] and row["errors"] == 1
    assert row["findings"][0]["kind"] == "unreadable" and row["findings"][0]["severity"] == "error"


def test_listing_takes_kraft_dynamic_broker_configs_by_the_broker_rule(tmp_path):
    """A KRaft dir's dynamic broker configs reach the scan's compaction decision as a broker takes
    them at start-up (log/dynamic_log_config, the rule serve and the offline commands follow): an
    invalid stored value beside a valid log.cleanup.policy=compact is left out, and the topic
    still counts as compacted (before: the bad value failed the resolution, so not compacted)."""
    from kafkatool.commands.topic_sources import TopicConfigs
    from kafkatool.log import topic_settings as ts
    from tests.broker.test_topic_config_sources import _broker_config_record, write_kraft_dir

    d = tmp_path / "kraft"
    write_kraft_dir(
        d,
        "events",
        {},
        extra=[
            _broker_config_record("", "log.cleanup.policy", "compact"),
            _broker_config_record("", "log.retention.hours", "1"),  # read-only in Kafka
            _broker_config_record("1", "log.segment.bytes", "5"),  # below Kafka's atLeast(14)
            _broker_config_record("1", "producer.id.expiration.ms", "soon"),  # not an INT
        ],
    )
    (info,) = S.list_log_dir(str(d)).partitions
    assert (info.replica.topic, info.cleaner_offset, info.compacted) == ("events", None, True)
    layers = S.dir_config_layers(d, 1)
    (kraft,) = [la for la in layers if la.label == ts.SOURCE_KRAFT]
    meta = d / ts.CLUSTER_METADATA_DIR
    assert kraft.broker == {"log.cleanup.policy": "compact"}
    assert kraft.notes == [
        f"dynamic broker config log.retention.hours in {meta} (cluster default) ignored: Cannot update "
        "these configs dynamically: Set(log.retention.hours)",
        f"dynamic broker config log.segment.bytes in {meta} (broker 1) ignored: Invalid value 5 for "
        "configuration log.segment.bytes: Value must be at least 14",
        f"dynamic broker config producer.id.expiration.ms in {meta} (broker 1) ignored: Invalid value "
        "soon for configuration producer.id.expiration.ms: Not a number of type INT",
    ]
    # the offline commands (the broker's whole rule) resolve the topic to the same settings
    offline = TopicConfigs.of_log_dirs([d], {}).resolve(d, "events")
    fleet = ts.resolve("events", layers=layers)
    assert offline.config == fleet.config and offline.sources == fleet.sources
    assert fleet.config.cleanup_policy == ("compact",)


def test_listing_leaves_out_a_kraft_set_a_broker_cannot_run_with(tmp_path):
    """Values each valid alone but breaking KafkaConfig's requirements together are not taken at
    all (processReconfiguration), by the scan as by serve and the offline commands."""
    from tests.broker.test_topic_config_sources import _broker_config_record, write_kraft_dir

    d = tmp_path / "kraft"
    write_kraft_dir(
        d,
        "events",
        {},
        extra=[
            _broker_config_record("", "log.retention.ms", "0"),
            _broker_config_record("", "log.cleanup.policy", "compact"),
        ],
    )
    (info,) = S.list_log_dir(str(d)).partitions
    assert info.compacted is False
    assert [n for la in S.dir_config_layers(d, 1) for n in la.notes] == [
        f"dynamic broker configs in {d / '__cluster_metadata-0'} (cluster default) not applied: "
        "requirement failed: log.retention.ms must be unlimited (-1) or, greater than or equal to 1"
    ]


def test_listing_takes_the_replica_brokers_own_kraft_configs(tmp_path):
    """The broker's own dynamic configs are those of the replica's broker: the inventory's id
    (the id the broker runs as) over the dir's meta.properties."""
    from tests.broker.test_topic_config_sources import _broker_config_record, write_kraft_dir

    d = tmp_path / "kraft"
    write_kraft_dir(d, "events", {}, extra=[_broker_config_record("7", "log.cleanup.policy", "compact")])
    (info,) = S.list_log_dir(str(d)).partitions  # meta.properties: node 1
    assert info.compacted is False
    listing = S.list_log_dir(str(d), 7)
    assert listing.partitions[0].compacted is True
    assert [f["kind"] for f in listing.findings] == ["broker_id_overridden"]


def test_a_stored_topic_config_a_broker_refuses_is_a_finding_naming_its_record(tmp_path):
    """cleanup.policy=bogus stored for a topic in a KRaft log: a broker does not start with it
    (Kafka: LogManager.fetchTopicConfigOverrides' LogConfig.fromProps, a fatal fault of the first
    metadata publishing; serve: exit 2).  The scan says so, an error naming the ConfigRecord's
    file, offset and batch position, the topic and the refused value, and leaves the value out:
    the topic's other configs decide whether it is compacted (here the cluster-wide
    log.cleanup.policy=compact; before, the bad value failed the resolution silently).  The notes
    of the dir's dynamic broker configs are findings too, naming their records."""
    from kafkatool.log import topic_settings as ts
    from tests.broker.test_topic_config_sources import _broker_config_record, write_kraft_dir

    d = tmp_path / "kraft"
    extra = [
        _broker_config_record("", "log.cleanup.policy", "compact"),  # offset 4
        _broker_config_record("1", "log.segment.bytes", "5"),  # offset 5: below atLeast(14)
    ]
    # offsets: 0 TopicRecord, 1-3 the topic's ConfigRecords
    write_kraft_dir(
        d, "events", {"cleanup.policy": "bogus", "retention.ms": "soon", "segment.bytes": "2048"}, extra=extra
    )
    listing = S.list_log_dir(str(d))
    (info,) = listing.partitions
    assert info.compacted is True
    segment = str(d / ts.CLUSTER_METADATA_DIR / "00000000000000000000.log")
    found = [f for f in listing.findings if f["kind"] != "dynamic_config_ignored"]
    assert found == [
        {
            "file": segment,
            "position": 0,
            "end": None,
            "offset": 1,
            "kind": "topic_config_refused",
            "severity": "error",
            "message": "topic events: stored config refused: Invalid value bogus for configuration cleanup.policy: "
            f"String must be one of: compact, delete (in {ts.SOURCE_KRAFT}: {segment}, record at offset 1, batch "
            "at byte 0); a broker does not start with it (LogManager's topic LogConfig); the scan leaves "
            "it out",
            "topic": "events",
        },
        {
            "file": segment,
            "position": 0,
            "end": None,
            "offset": 2,
            "kind": "topic_config_refused",
            "severity": "error",
            "message": "topic events: stored config refused: Invalid value soon for configuration retention.ms: "
            f"Not a number of type LONG (in {ts.SOURCE_KRAFT}: {segment}, record at offset 2, batch at byte 0); a broker does "
            "not start with it (LogManager's topic LogConfig); the scan leaves it out",
            "topic": "events",
        },
    ]
    (note,) = [f for f in listing.findings if f["kind"] == "dynamic_config_ignored"]
    assert (note["file"], note["offset"], note["position"], note["severity"]) == (segment, 5, 0, "warning")
    assert note["message"] == (
        f"dynamic broker config log.segment.bytes in {d / ts.CLUSTER_METADATA_DIR} (broker 1) ignored: "
        "Invalid value 5 for configuration log.segment.bytes: Value must be at least 14"
    )
    # serve refuses the dir for the same values, by the same rule, in the same words
    from kafkatool.broker.config import BrokerConfig, ConfigError
    from kafkatool.broker.server import Broker

    b = Broker(BrokerConfig.load(None, [f"log.dirs={d}", "listeners=PLAINTEXT://127.0.0.1:0", "node.id=1"]))
    try:
        with pytest.raises(ConfigError) as refused:
            b.open_storage()
    finally:
        if b.manager is not None:
            b.close_storage()
    said = "; ".join(f["message"].split("; a broker does not start")[0] for f in found)
    assert str(refused.value) == said


def test_a_stored_remote_storage_enable_is_a_finding_naming_its_store(tmp_path, caplog):
    """remote.storage.enable=true stored for a topic: tiered storage is never on here, so a KRaft
    broker (and serve) logs an error as it takes the topic's configs and serves a local log, and a
    ZooKeeper-mode broker does not start (topic_settings.stored_topic_config_error).  The scan
    says so, an error naming the topic and the record that stored the value; the topic's other
    configs still decide "compacted".  Once serve ran on the dir (it logs the error and runs) its
    kafkatool-cluster.json keeps the value too, and that is a finding of its own, naming the file."""
    import logging

    from kafkatool.broker.config import BrokerConfig
    from kafkatool.broker.server import Broker
    from kafkatool.log import topic_settings as ts
    from tests.broker.test_topic_config_sources import write_kraft_dir

    d = tmp_path / "kraft"
    write_kraft_dir(d, "events", {"remote.storage.enable": "true", "cleanup.policy": "compact"})
    segment = str(d / ts.CLUSTER_METADATA_DIR / "00000000000000000000.log")
    kraft_says = (
        f"topic events: stored config refused: {ts.REMOTE_STORAGE_STORED} (in {ts.SOURCE_KRAFT}: "
        f"{segment}, record at offset 1, batch at byte 0); tiered storage is off: a KRaft broker (and "
        "serve) logs it as an error and serves the topic as a local log, a ZooKeeper-mode broker does "
        "not start"
    )
    listing = S.list_log_dir(str(d))
    assert listing.partitions[0].compacted is True
    assert listing.findings == [
        {
            "file": segment,
            "position": 0,
            "end": None,
            "offset": 1,
            "kind": "topic_remote_storage_enabled",
            "severity": "error",
            "message": kraft_says,
            "topic": "events",
        }
    ]
    caplog.set_level(logging.ERROR, logger="kafkatool")
    b = Broker(BrokerConfig.load(None, [f"log.dirs={d}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    try:
        b.open_storage()
    finally:
        b.close_storage()
    assert any("remote.storage.enable=true" in r.getMessage() for r in caplog.records)
    embedded = str(d / ts.EMBEDDED_METADATA_FILE)
    found = S.list_log_dir(str(d)).findings
    assert [(f["kind"], f["file"], f["offset"], f["topic"]) for f in found] == [
        ("topic_remote_storage_enabled", embedded, None, "events"),
        ("topic_remote_storage_enabled", segment, 1, "events"),
    ]
    assert found[0]["message"] == kraft_says.replace(
        f"{ts.SOURCE_KRAFT}: {segment}, record at offset 1, batch at byte 0",
        f"{ts.SOURCE_EMBEDDED}: {embedded}",
    )


def test_a_dynamic_set_a_broker_cannot_run_with_is_a_finding(tmp_path):
    """The note serve logs when a stored set breaks KafkaConfig's requirements (nothing of it is
    taken) is a warning finding of the scan, naming where the set is kept."""
    from kafkatool.log import topic_settings as ts
    from tests.broker.test_topic_config_sources import _broker_config_record, write_kraft_dir

    d = tmp_path / "kraft"
    write_kraft_dir(d, "events", {}, extra=[_broker_config_record("", "log.retention.ms", "0")])
    (f,) = S.list_log_dir(str(d)).findings
    assert (f["kind"], f["severity"], f["file"], f["topic"]) == (
        "dynamic_configs_not_applied",
        "warning",
        str(d / ts.CLUSTER_METADATA_DIR),
        None,
    )
    assert f["message"].endswith(
        "requirement failed: log.retention.ms must be unlimited (-1) or, greater than or equal to 1"
    )
