"""The fleet scan as a Spark job.

Stages (one Spark task per unit of work):

1. list: one task per log dir reads meta.properties and the checkpoints, walks
   the partition dirs and checks their small files; it yields segment work
   items (no segment is read yet);
2. scan: the segments are spread evenly over many tasks (a huge partition
   is many tasks, not one straggler); each runs verify on its segment and
   indexes and returns the segment's row and its batch digests;
3. aggregate: per partition copy, the checks that need consecutive segments
   (overlaps, gaps, epochs); per (partition, offset window), the copies are
   compared batch by batch; totals per partition and per broker.

Run it through ``kafkatool fleet scan``, ``python -m kafkatool.fleet.job``, or
submit this module to a cluster (``kafkatool fleet zip kafkatool.zip`` writes
the package zip; the compiled dependencies must be installed on the executors)::

    spark-submit --master spark://HOST:7077 --py-files kafkatool.zip \
        .../kafkatool/fleet/job.py --inventory FLEET.json --output out/

It prints JSON lines like ``kafkatool fleet scan --json``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.errors import KafkatoolError
from kafkatool.fleet import aggregate as A
from kafkatool.fleet import scan as S
from kafkatool.fleet.inventory import Inventory
from kafkatool.forensics import verify as V
from kafkatool.log import fileops

LOCAL_DEFAULT = "local[*]"


def make_spark(
    master: str | None = None, *, app_name: str = "kafkatool-fleet-scan", conf: dict | None = None
):
    """A SparkSession for the scan.

    ``master`` None or ``local[...]``: an embedded Spark in this process's JVM, nothing to
    install.  A cluster master: the kafkatool package is zipped and shipped to the executors
    with ``addPyFile``.  Under ``spark-submit`` (this module as the application) the
    submitted settings rule: no master is forced and ``--py-files`` ships the package."""
    from pyspark.sql import SparkSession

    submitted = "PYSPARK_GATEWAY_PORT" in os.environ and SparkSession.getActiveSession() is None
    if master is None and not submitted:
        master = LOCAL_DEFAULT
    local = master is not None and master.startswith("local")
    b = SparkSession.builder.appName(app_name)
    if master is not None:
        b = b.master(master)
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "16",
        "spark.python.worker.reuse": "true",
    }
    conf = dict(conf or {})
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
        # local executors run this interpreter, which has kafkatool and its compiled dependencies
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if not submitted:
        # Spark's INFO/WARN chatter would drown the report: errors only (for a JVM started here)
        quiet = f"-Dlog4j2.configurationFile={_log4j2_config().as_uri()}"
        java_opts = conf.pop("spark.driver.extraJavaOptions", "")
        settings["spark.driver.extraJavaOptions"] = f"{quiet} {java_opts}".strip()
    settings.update(conf)
    for k, v in settings.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not submitted and not spark.sparkContext.master.startswith("local"):
        from kafkatool.fleet.package import build_zip

        spark.sparkContext.addPyFile(str(build_zip()))
    return spark


_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""


def _log4j2_config() -> Path:
    import tempfile

    path = Path(tempfile.gettempdir()) / f"kafkatool-spark-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2)
        os.replace(tmp, path)
    return path


# ---------------------------------------------------------------- schemas


def _schemas():
    from pyspark.sql import types as T

    finding = T.StructType(
        [
            T.StructField("file", T.StringType()),
            T.StructField("position", T.LongType()),
            T.StructField("end", T.LongType()),
            T.StructField("offset", T.LongType()),
            T.StructField("kind", T.StringType()),
            T.StructField("severity", T.StringType()),
            T.StructField("message", T.StringType()),
        ]
    )
    segment = T.StructType(
        [
            T.StructField("broker", T.IntegerType()),
            T.StructField("log_dir", T.StringType()),
            T.StructField("topic", T.StringType()),
            T.StructField("partition", T.IntegerType()),
            T.StructField("file", T.StringType()),
            T.StructField("active", T.BooleanType()),
            T.StructField("base_offset", T.LongType()),
            T.StructField("first_offset", T.LongType()),
            T.StructField("last_offset", T.LongType()),
            T.StructField("batches", T.LongType()),
            T.StructField("records", T.LongType()),
            T.StructField("bytes", T.LongType()),
            T.StructField("valid_end", T.LongType()),
            T.StructField("codecs", T.ArrayType(T.StringType())),
            T.StructField("magics", T.ArrayType(T.IntegerType())),
            T.StructField("min_timestamp", T.LongType()),
            T.StructField("max_timestamp", T.LongType()),
            T.StructField("producer_ids", T.ArrayType(T.LongType())),
            T.StructField("leader_epochs", T.ArrayType(T.IntegerType())),
            T.StructField("findings", T.ArrayType(finding)),
            T.StructField("errors", T.IntegerType()),
            T.StructField("warnings", T.IntegerType()),
        ]
    )
    located = [
        T.StructField("broker", T.IntegerType()),
        T.StructField("log_dir", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
    ]
    findings = T.StructType(located + list(finding.fields))
    gaps = T.StructType(
        located
        + [
            T.StructField("file", T.StringType()),
            T.StructField("previous_file", T.StringType()),
            T.StructField("from_offset", T.LongType()),
            T.StructField("to_offset", T.LongType()),
            T.StructField("missing", T.LongType()),
            T.StructField("compacted", T.BooleanType()),
        ]
    )
    side = [
        ("brokers", T.ArrayType(T.IntegerType())),
        ("log_dirs", T.ArrayType(T.StringType())),
        ("epochs", T.ArrayType(T.IntegerType())),
        ("crcs", T.ArrayType(T.LongType())),
        ("base_offsets", T.ArrayType(T.LongType())),
        ("last_offsets", T.ArrayType(T.LongType())),
    ]
    divergence = T.StructType(
        [
            T.StructField("topic", T.StringType()),
            T.StructField("partition", T.IntegerType()),
            T.StructField("offset", T.LongType()),
        ]
        + [T.StructField(n, t) for n, t in side]
    )
    return {
        "finding": finding,
        "segments": segment,
        "findings": findings,
        "gaps": gaps,
        "divergences": divergence,
    }


SEGMENT_COLUMNS = [
    "broker",
    "log_dir",
    "topic",
    "partition",
    "file",
    "active",
    "base_offset",
    "first_offset",
    "last_offset",
    "batches",
    "records",
    "bytes",
    "valid_end",
    "codecs",
    "magics",
    "min_timestamp",
    "max_timestamp",
    "producer_ids",
    "leader_epochs",
    "findings",
    "errors",
    "warnings",
]
_FINDING_FIELDS = ("file", "position", "end", "offset", "kind", "severity", "message")


def _segment_tuple(row: dict) -> tuple:
    out = []
    for c in SEGMENT_COLUMNS:
        v = row[c]
        if c == "findings":
            v = [tuple(f[k] for k in _FINDING_FIELDS) for f in v]
        out.append(v)
    return tuple(out)


_SLIM = (
    "file",
    "base_offset",
    "first_offset",
    "last_offset",
    "batches",
    "records",
    "bytes",
    "valid_end",
    "min_timestamp",
    "max_timestamp",
    "errors",
    "epoch_starts",
    "damaged",
)


# ---------------------------------------------------------------- the job


@dataclass
class ScanResult:
    findings: list[dict] = field(default_factory=list)  # type "finding", located
    divergences: list[dict] = field(default_factory=list)
    gaps: list[dict] = field(default_factory=list)
    replicas: list[dict] = field(default_factory=list)  # per partition copy totals
    brokers: list[dict] = field(default_factory=list)
    partitions: list[dict] = field(default_factory=list)  # per topic-partition
    corrupt_segments: list[dict] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)  # seconds per stage (list, scan, ...)

    def partition_sizes(self) -> list[dict]:
        """The lines ``kafkatool reassign generate --strategy size`` reads (orphans left out)."""
        return [
            {
                "type": "partition_size",
                "topic": r["topic"],
                "partition": r["partition"],
                "broker": r["broker"],
                "size": r["bytes"],
            }
            for r in self.replicas
            if not r["orphaned"] and r["broker"] is not None
        ]


def _replica_id(row) -> tuple:
    return (row["broker"] if row["broker"] is not None else -1, row["log_dir"])


class ScanInterrupted(KafkatoolError):
    """The scan was asked to stop (``should_stop``); its Spark jobs were cancelled."""


class ProgressMonitor:
    """Reports a running scan: the scan's stage, segments and bytes verified (accumulators the
    tasks add to as they finish) and Spark's active stages with their task counts (the status
    tracker), polled on a thread every ``interval`` seconds.  ``report`` gets one dict per
    poll: ``{"type": "progress", "stage", "segments_done", "segments_total", "bytes_done",
    "bytes_total", "spark_stages": [{"id", "name", "tasks", "done", "active"}], "elapsed_s"}``."""

    def __init__(self, sc, report, *, interval: float = 0.5):
        import threading

        self.sc = sc
        self.report = report
        self.interval = interval
        self.stage = "start"
        self.segments_total = 0
        self.bytes_total = 0
        self.segments = sc.accumulator(0)
        self.bytes = sc.accumulator(0)
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kafkatool-scan-progress", daemon=True)
        self._lock = threading.Lock()

    def start(self) -> ProgressMonitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self.emit()

    def set_stage(self, stage: str) -> None:
        self.stage = stage
        self.emit()

    def event(self) -> dict:
        stages = []
        try:
            tracker = self.sc.statusTracker()
            for sid in sorted(tracker.getActiveStageIds()):
                info = tracker.getStageInfo(sid)
                if info is not None:
                    stages.append(
                        {
                            "id": sid,
                            "name": re.sub(r"\S*/", "", info.name),  # "count at job.py:461"
                            "tasks": info.numTasks,
                            "done": info.numCompletedTasks,
                            "active": info.numActiveTasks,
                        }
                    )
        except Exception:  # the context is stopping: report what the scan itself knows
            stages = []
        return {
            "type": "progress",
            "stage": self.stage,
            "segments_done": min(self.segments.value, self.segments_total),
            "segments_total": self.segments_total,
            "bytes_done": min(self.bytes.value, self.bytes_total),
            "bytes_total": self.bytes_total,
            "spark_stages": stages,
            "elapsed_s": round(time.monotonic() - self._t0, 1),
        }

    def emit(self) -> None:
        with self._lock:
            self.report(self.event())

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.emit()


def run_scan(
    spark,
    inventory: Inventory,
    *,
    deep: bool = True,
    output: str | os.PathLike | None = None,
    window: int = S.DEFAULT_WINDOW,
    segments_per_task: int = 64,
    progress=None,
    should_stop=None,
) -> ScanResult:
    """The whole scan.  ``progress``: a callable that receives progress events (see
    :class:`ProgressMonitor`); ``should_stop``: a callable checked between stages (raise
    :class:`ScanInterrupted` when it says so; cancelling the Spark jobs is the caller's part,
    which makes the running stage fail)."""
    monitor = ProgressMonitor(spark.sparkContext, progress).start() if progress is not None else None
    try:
        return _run_scan(
            spark, inventory, deep, output, window, segments_per_task, monitor, should_stop or (lambda: False)
        )
    except Exception:
        if should_stop is not None and should_stop():
            raise ScanInterrupted("the scan was interrupted") from None
        raise
    finally:
        if monitor is not None:
            monitor.stop()


def _run_scan(spark, inventory, deep, output, window, segments_per_task, monitor, should_stop) -> ScanResult:
    from pyspark import StorageLevel

    sc = spark.sparkContext
    specs = inventory.log_dirs
    if not specs:
        raise ValueError("no log dirs to scan")
    assignment = inventory.assignment
    b_assign = sc.broadcast(assignment)

    # ---- 1. list every log dir (one task each)
    listing = sc.parallelize([(s.path, s.broker) for s in specs], len(specs)).map(
        lambda x: S.list_log_dir(x[0], x[1])
    )
    listing.persist(StorageLevel.MEMORY_AND_DISK)
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    order = ["list", "scan", "summarize", "compare", "collect"] + (["write"] if output is not None else [])

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[stage] = round(now - clock, 3)
        clock = now
        if should_stop():
            raise ScanInterrupted(f"the scan was interrupted after its {stage} stage")
        if monitor is not None:
            i = order.index(stage) + 1
            monitor.set_stage(order[i] if i < len(order) else "done")

    if monitor is not None:
        monitor.set_stage("list")
    dirs = listing.map(
        lambda d: (
            d.log_dir,
            d.broker,
            d.meta_broker,
            d.findings,
            len(d.segments),
            sum(t.size for t in d.segments),
        )
    ).collect()
    n_segments = sum(d[4] for d in dirs)
    if monitor is not None:
        monitor.segments_total = n_segments
        monitor.bytes_total = sum(d[5] for d in dirs)
    dirs = [d[:5] for d in dirs]
    lap("list")

    # ---- 2. verify every segment, spread evenly
    n_tasks = max(sc.defaultParallelism * 2, -(-int(n_segments) // segments_per_task), 1)
    n_tasks = min(n_tasks, max(int(n_segments), 1))
    tasks = listing.flatMap(lambda d: d.segments).repartition(n_tasks)
    if monitor is not None:
        seg_acc, byte_acc = monitor.segments, monitor.bytes

        def scan_one(t):
            out = S.scan_segment(t, deep=deep, window=window)
            seg_acc.add(1)
            byte_acc.add(t.size)
            return out

        scanned = tasks.map(scan_one)
    else:
        scanned = tasks.map(lambda t: S.scan_segment(t, deep=deep, window=window))
    scanned.persist(StorageLevel.MEMORY_AND_DISK)
    scanned.count()
    lap("scan")
    rows = scanned.map(lambda r: r[0])

    schemas = _schemas()
    seg_df = spark.createDataFrame(rows.map(_segment_tuple), schemas["segments"])

    # ---- 3a. per partition copy: cross-segment checks, gaps, extents, orphans
    infos = listing.flatMap(lambda d: d.partitions).map(lambda i: (i.replica.key, i))
    slim = rows.map(
        lambda r: ((r["topic"], r["partition"], r["broker"], r["log_dir"]), {k: r[k] for k in _SLIM})
    )

    def summarize(kv):
        (topic, part, broker, log_dir), (segs, infos_) = kv
        info = next(iter(infos_), None)
        s = A.summarize_replica(
            topic,
            part,
            broker,
            log_dir,
            list(segs),
            epoch_checkpoint=info.epoch_checkpoint if info else None,
            epoch_checkpoint_file=info.epoch_checkpoint_file if info else None,
            cleaner_offset=info.cleaner_offset if info else None,
            compacted=info.compacted if info else False,
        )
        findings = (list(info.findings) if info else []) + s.findings
        assign = b_assign.value
        orphaned = False
        if assign is not None and broker is not None:
            replicas = assign.get((topic, part))
            if replicas is None or broker not in replicas:
                orphaned = True
                findings.append(
                    {
                        "file": str(Path(log_dir) / f"{topic}-{part}"),
                        "position": None,
                        "end": None,
                        "offset": None,
                        "kind": "orphaned_replica",
                        "severity": V.WARNING,
                        "message": (
                            f"broker {broker} is not a replica of {topic}-{part} "
                            + (
                                f"(replicas {replicas})"
                                if replicas is not None
                                else "(not in the assignment)"
                            )
                            + ": a leftover copy, e.g. of an interrupted reassignment"
                        ),
                    }
                )
        return {
            "topic": topic,
            "partition": part,
            "broker": broker,
            "log_dir": log_dir,
            "orphaned": orphaned,
            "segments": s.segments,
            "batches": s.batches,
            "records": s.records,
            "bytes": s.bytes,
            "first_offset": s.first_offset,
            "last_offset": s.last_offset,
            "min_timestamp": s.min_timestamp,
            "max_timestamp": s.max_timestamp,
            "corrupt_segments": s.corrupt_segments,
            "findings": findings,
            "gaps": s.gaps,
            "extent": None
            if s.first_offset is None or orphaned
            else A.ReplicaExtent(s.first_offset, s.last_offset, s.unknown, s.cleaner_offset),
        }

    summaries = slim.cogroup(infos).map(summarize)

    replicas = summaries.collect()
    lap("summarize")

    # ---- 3b. replica divergence, per (partition, offset window); the extents of the
    # copies (a few numbers each) go to every task in a broadcast
    by_tp: dict = defaultdict(dict)
    for r in replicas:
        ext = r.pop("extent")
        if ext is not None:
            by_tp[(r["topic"], r["partition"])][_replica_id(r)] = ext
    b_ext = sc.broadcast({tp: e for tp, e in by_tp.items() if len(e) > 1})

    def digest_rows(result):
        row, windows = result
        tp = (row["topic"], row["partition"])
        if tp not in b_ext.value:
            return []
        rid = _replica_id(row)
        return [((tp, w), (rid, blob)) for w, blob in windows]

    def compare_window(kv):
        (tp, _w), items = kv
        ext = b_ext.value[tp]
        batches: dict = defaultdict(list)
        for rid, blob in items:
            batches[rid] += S.unpack_digests(blob)
        rids = sorted(ext)
        out = []
        for i, ra in enumerate(rids):
            for rb in rids[i + 1 :]:
                la = sorted(batches.get(ra, []))
                lb = sorted(batches.get(rb, []))
                if not la and not lb:
                    continue
                d = A.compare_replicas(la, lb, ext[ra], ext[rb])
                if d is not None:
                    out.append(((tp, ra, rb), d))
        return out

    divergent = (
        scanned.flatMap(digest_rows)
        .groupByKey()
        .flatMap(compare_window)
        .reduceByKey(lambda x, y: x if x["offset"] <= y["offset"] else y)
        .collect()
    )
    lap("compare")

    # ---- collect the (small) results
    stats = rows.treeAggregate(_RowStats(), _RowStats.add, _RowStats.merge)
    result = _assemble(inventory, dirs, replicas, stats, divergent)
    lap("collect")
    if output is not None:
        _write_output(spark, Path(output), seg_df, result, schemas)
        lap("write")
    result.timings = timings
    scanned.unpersist()
    listing.unpersist()
    b_ext.unpersist()
    b_assign.unpersist()
    return result


class _RowStats:
    """Totals, codecs, findings and corrupt segments over the segment rows, in one pass."""

    def __init__(self):
        self.totals = Counter()
        self.codecs = Counter()
        self.findings: list = []
        self.corrupt: list = []

    @staticmethod
    def add(acc: _RowStats, r: dict) -> _RowStats:
        acc.totals.update(
            segments=1,
            batches=r["batches"],
            records=r["records"],
            bytes=r["bytes"],
            corrupt_segments=int(r["errors"] > 0),
        )
        for c in r["codecs"]:
            acc.codecs[c] += r["bytes"]
        loc = (r["broker"], r["log_dir"], r["topic"], r["partition"])
        acc.findings += [(*loc, f) for f in r["findings"]]
        if r["errors"]:
            acc.corrupt.append(
                {
                    "broker": r["broker"],
                    "log_dir": r["log_dir"],
                    "topic": r["topic"],
                    "partition": r["partition"],
                    "file": r["file"],
                    "bytes": r["bytes"],
                    "valid_end": r["valid_end"],
                    "damage": [
                        [f["position"], f["end"], f["kind"]]
                        for f in r["findings"]
                        if f["severity"] == V.ERROR
                    ],
                }
            )
        return acc

    @staticmethod
    def merge(a: _RowStats, b: _RowStats) -> _RowStats:
        a.totals.update(b.totals)
        a.codecs.update(b.codecs)
        a.findings += b.findings
        a.corrupt += b.corrupt
        return a


def _locate(finding: dict, broker, log_dir, topic, partition) -> dict:
    return {
        "type": "finding",
        "broker": broker,
        "log_dir": log_dir,
        "topic": topic,
        "partition": partition,
        **{k: finding[k] for k in _FINDING_FIELDS},
    }


def _assemble(inventory, dirs, replicas, stats: _RowStats, divergent) -> ScanResult:
    res = ScanResult()
    totals, codecs, seg_findings, corrupt = stats.totals, stats.codecs, stats.findings, stats.corrupt
    for log_dir, broker, _meta_broker, findings, _n in sorted(dirs, key=lambda d: d[0]):
        if broker is None:
            findings = findings + [
                {
                    "file": str(Path(log_dir) / V.META_PROPERTIES),
                    "position": None,
                    "end": None,
                    "offset": None,
                    "kind": "broker_id_unknown",
                    "severity": V.WARNING,
                    "message": "no broker.id/node.id in meta.properties and none in the inventory: replicas in "
                    "this log dir are named by the dir only",
                }
            ]
        # a finding about one topic's stored configs names it (stored_config_findings)
        res.findings += [_locate(f, broker, log_dir, f.get("topic"), None) for f in findings]
    for broker, log_dir, topic, part, f in seg_findings:
        res.findings.append(_locate(f, broker, log_dir, topic, part))
    for r in replicas:
        res.findings += [
            _locate(f, r["broker"], r["log_dir"], r["topic"], r["partition"]) for f in r["findings"]
        ]
        res.gaps += r["gaps"]
    res.replicas = sorted(
        ({k: v for k, v in r.items() if k not in ("findings", "gaps")} for r in replicas),
        key=lambda r: (
            r["topic"],
            r["partition"],
            r["broker"] if r["broker"] is not None else -1,
            r["log_dir"],
        ),
    )
    # assigned replicas with no copy on a scanned broker
    if inventory.assignment is not None:
        have = {(r["topic"], r["partition"], r["broker"]) for r in res.replicas}
        scanned_brokers = {d[1] for d in dirs if d[1] is not None}
        for (topic, part), reps in sorted(inventory.assignment.items()):
            for b in reps:
                if b in scanned_brokers and (topic, part, b) not in have:
                    res.findings.append(
                        _locate(
                            {
                                "file": None,
                                "position": None,
                                "end": None,
                                "offset": None,
                                "kind": "missing_replica",
                                "severity": V.WARNING,
                                "message": f"broker {b} is a replica of {topic}-{part} but none of its scanned "
                                "log dirs holds the partition",
                            },
                            b,
                            None,
                            topic,
                            part,
                        )
                    )
    res.findings.sort(
        key=lambda f: (
            f["broker"] if f["broker"] is not None else -1,
            f["file"] or "",
            f["position"] if f["position"] is not None else -1,
            f["kind"],
        )
    )
    for ((topic, part), ra, rb), d in sorted(divergent, key=lambda x: (x[0][0], x[0][1], x[0][2])):
        sides = (d["a"], d["b"])
        res.divergences.append(
            {
                "type": "divergence",
                "topic": topic,
                "partition": part,
                "brokers": [ra[0], rb[0]],
                "log_dirs": [ra[1], rb[1]],
                "offset": d["offset"],
                "epochs": [s["epoch"] if s else None for s in sides],
                "crcs": [s["crc"] if s else None for s in sides],
                "base_offsets": [s["base_offset"] if s else None for s in sides],
                "last_offsets": [s["last_offset"] if s else None for s in sides],
            }
        )
    # per topic-partition and per broker totals
    parts: dict = {}
    for r in res.replicas:
        p = parts.setdefault(
            (r["topic"], r["partition"]),
            {
                "topic": r["topic"],
                "partition": r["partition"],
                "replicas": [],
                "orphans": [],
                "size": 0,
                "records": 0,
                "log_end_offsets": {},
            },
        )
        (p["orphans"] if r["orphaned"] else p["replicas"]).append(r["broker"])
        if not r["orphaned"]:
            p["size"] = max(p["size"], r["bytes"])
            p["records"] = max(p["records"], r["records"])
            # keyed by broker id; a copy whose broker is unknown (no meta.properties) by its log dir
            key = str(r["broker"]) if r["broker"] is not None else r["log_dir"]
            p["log_end_offsets"][key] = None if r["last_offset"] is None else r["last_offset"] + 1
    res.partitions = [parts[k] for k in sorted(parts)]
    brokers: dict = {}
    for r in res.replicas:
        b = brokers.setdefault(
            r["broker"],
            {
                "broker": r["broker"],
                "partitions": 0,
                "segments": 0,
                "records": 0,
                "bytes": 0,
                "corrupt_segments": 0,
            },
        )
        b["partitions"] += 1
        for k in ("segments", "records", "bytes", "corrupt_segments"):
            b[k] += r[k]
    for b in brokers.values():
        host, rack = inventory.hosts.get(b["broker"], (None, None))
        b["host"], b["rack"] = host, rack
    res.brokers = sorted(brokers.values(), key=lambda b: b["broker"] if b["broker"] is not None else -1)
    res.corrupt_segments = sorted(corrupt, key=lambda c: c["file"])
    sev = Counter(f["severity"] for f in res.findings)
    res.summary = {
        "type": "summary",
        "log_dirs": len(dirs),
        "brokers": len(res.brokers),
        "partitions": len(res.partitions),
        "replicas": len(res.replicas),
        "segments": totals.get("segments", 0),
        "batches": totals.get("batches", 0),
        "records": totals.get("records", 0),
        "bytes": totals.get("bytes", 0),
        "codecs": dict(sorted(codecs.items())),
        "corrupt_segments": totals.get("corrupt_segments", 0),
        "divergent_partitions": len({(d["topic"], d["partition"]) for d in res.divergences}),
        "offset_gaps": len(res.gaps),
        "orphaned_replicas": sum(r["orphaned"] for r in res.replicas),
        "findings": sum(sev.values()),
        "errors": sev["error"],
        "warnings": sev["warning"],
        "infos": sev["info"],
        "kinds": dict(sorted(Counter(f["kind"] for f in res.findings).items())),
    }
    return res


def _write_output(spark, out: Path, seg_df, res: ScanResult, schemas) -> None:
    """Parquet tables under ``out`` plus ``partition_sizes.jsonl`` and ``summary.json``."""
    from pyspark.sql import types as T

    out.mkdir(parents=True, exist_ok=True)
    seg_df.write.mode("overwrite").parquet(str(out / "segments"))

    def small(name: str, rows: list[tuple], schema) -> None:
        # tables assembled on the driver: one file each
        spark.createDataFrame(rows, schema).coalesce(1).write.mode("overwrite").parquet(str(out / name))

    loc = ("broker", "log_dir", "topic", "partition")
    small("findings", [tuple(f[k] for k in loc + _FINDING_FIELDS) for f in res.findings], schemas["findings"])
    gap_cols = [f.name for f in schemas["gaps"].fields]
    small("gaps", [tuple(g[c] for c in gap_cols) for g in res.gaps], schemas["gaps"])
    div_cols = [f.name for f in schemas["divergences"].fields]
    small("divergences", [tuple(d[c] for c in div_cols) for d in res.divergences], schemas["divergences"])
    rtypes = {
        "topic": T.StringType(),
        "log_dir": T.StringType(),
        "orphaned": T.BooleanType(),
        "partition": T.IntegerType(),
        "broker": T.IntegerType(),
    }
    rschema = T.StructType([T.StructField(c, rtypes.get(c, T.LongType())) for c in REPLICA_COLUMNS])
    small("replicas", [tuple(r[c] for c in REPLICA_COLUMNS) for r in res.replicas], rschema)
    pschema = T.StructType(
        [
            T.StructField("topic", T.StringType()),
            T.StructField("partition", T.IntegerType()),
            T.StructField("replicas", T.ArrayType(T.IntegerType())),
            T.StructField("orphans", T.ArrayType(T.IntegerType())),
            T.StructField("size", T.LongType()),
            T.StructField("records", T.LongType()),
            T.StructField("log_end_offsets", T.MapType(T.StringType(), T.LongType())),
        ]
    )
    small("partitions", [tuple(p[f.name] for f in pschema.fields) for p in res.partitions], pschema)
    btypes = {"broker": T.IntegerType(), "host": T.StringType(), "rack": T.StringType()}
    bschema = T.StructType([T.StructField(c, btypes.get(c, T.LongType())) for c in BROKER_COLUMNS])
    small("brokers", [tuple(b[c] for c in BROKER_COLUMNS) for b in res.brokers], bschema)
    fileops.atomic_write(
        out / "partition_sizes.jsonl",
        "".join(json.dumps(s) + "\n" for s in res.partition_sizes()).encode(),
        sync=False,
        mode=0o666,
    )
    fileops.atomic_write(
        out / "summary.json", (json.dumps(res.summary, indent=1) + "\n").encode(), sync=False, mode=0o666
    )


REPLICA_COLUMNS = [
    "topic",
    "partition",
    "broker",
    "log_dir",
    "orphaned",
    "segments",
    "batches",
    "records",
    "bytes",
    "first_offset",
    "last_offset",
    "min_timestamp",
    "max_timestamp",
    "corrupt_segments",
]
BROKER_COLUMNS = ["broker", "host", "rack", "partitions", "segments", "records", "bytes", "corrupt_segments"]


def json_lines(res: ScanResult) -> list[dict]:
    """What ``--json`` prints, in order: findings, divergences, partition sizes, the summary."""
    return res.findings + res.divergences + res.partition_sizes() + [res.summary]


def failed(res: ScanResult, fail_on: str = "error") -> bool:
    severities = V.failing_severities(fail_on)
    return bool(res.divergences) or any(f["severity"] in severities for f in res.findings)


def main(argv: list[str] | None = None) -> int:
    """``spark-submit kafkatool/fleet/job.py`` / ``python -m kafkatool.fleet.job``: JSON lines on stdout."""
    import argparse

    from kafkatool.fleet.inventory import from_paths, load_inventory

    ap = argparse.ArgumentParser(prog="kafkatool.fleet.job", description="Fleet-wide scan of Kafka log dirs.")
    ap.add_argument("log_dirs", nargs="*", metavar="LOGDIR")
    ap.add_argument("--inventory")
    ap.add_argument("--output")
    ap.add_argument("--master")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--fail-on", choices=("error", "warning"), default="error")
    args = ap.parse_args(argv)
    if not args.inventory and not args.log_dirs:
        ap.error("give --inventory FLEET.json or LOGDIR...")
    inv = load_inventory(args.inventory) if args.inventory else from_paths(args.log_dirs)
    if args.inventory and args.log_dirs:
        inv.log_dirs += from_paths(args.log_dirs).log_dirs
    spark = make_spark(args.master)
    res = run_scan(spark, inv, deep=not args.quick, output=args.output)
    for obj in json_lines(res):
        sys.stdout.write(json.dumps(obj, default=str) + "\n")
    return 1 if failed(res, args.fail_on) else 0


if __name__ == "__main__":
    sys.exit(main())
