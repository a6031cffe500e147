"""``kafkatool fleet``: fleet-wide scans of Kafka log dirs on Apache Spark."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from pathlib import Path

import typer
from rich.table import Table

from kafkatool.commands.common import (
    EXIT_FINDINGS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    JSON_HELP,
    CommandError,
    console,
    emit_json,
    err_console,
    fail_on_option,
    failing,
    handle_errors,
)

SCAN_HELP = """Verify the log dirs of a whole fleet with Apache Spark (PySpark).

The same checks as `kafkatool verify` (every batch's CRC and framing, every
record unless --quick, offset/time/txn indexes against the log, snapshots,
checkpoints, meta.properties, partition.metadata, overlapping segments, leader
epochs against leader-epoch-checkpoint), plus what needs the whole fleet:
offset gaps between consecutive segments, replica divergence (the copies of a
partition on different brokers compared batch by batch over their common
offset range: first diverging offset, leader epoch and CRC on each side),
orphaned replicas (needs an "assignment" in the inventory), -delete/-future/
-stray dirs, totals per partition and per broker, sizes per partition.

Input: --inventory FLEET.json, an object {"brokers": {"1": {"host": ..,
"rack": .., "log_dirs": [..]}}, "assignment": {"partitions": [{"topic",
"partition", "replicas"}]}} (assignment optional), and/or LOGDIR... for a quick
run.  A log dir's broker is its meta.properties broker.id (ZooKeeper) or
node.id (KRaft); the inventory overrides it.  A partition counts as compacted
(its offset gaps are by design) when the cleaner-offset-checkpoint lists it or
its cleanup.policy, from the log dir's metadata, contains compact; dynamic
broker configs there (a KRaft __cluster_metadata log, kafkatool serve's file)
are taken as a broker takes them at start-up, its own being those of the
dir's broker: an invalid stored value is left out, a set a broker could not
run with is not used (each a warning finding, naming the record where the
place has records: dynamic_config_ignored, dynamic_configs_not_applied;
stored_configs_unreadable for a place that cannot be read).  A topic config
value a broker refuses (cleanup.policy=bogus: it does not start with it) is
an error finding, topic_config_refused, naming the topic, the value and the
record (file, offset, batch position) that stored it; the scan leaves it out
and the topic's other configs decide.  A topic stored with
remote.storage.enable=true is an error finding too,
topic_remote_storage_enabled, naming its record: tiered storage is off, so a
KRaft broker (and kafkatool serve) logs an error and serves the topic as a
local log, and a ZooKeeper-mode broker does not start.

Where it runs: embedded Spark (local[*], nothing to install) by default;
--master spark://HOST:PORT, yarn or k8s://... for a cluster (the kafkatool
package is zipped and shipped to the executors; its compiled dependencies
must be installed there), or spark-submit the job module:
`kafkatool fleet zip kafkatool.zip && spark-submit --py-files kafkatool.zip
$(python -c 'import kafkatool.fleet.job as j; print(j.__file__)') --inventory
FLEET.json --output out/`.  Every path must be readable by every executor
under the same name: Spark may run any task on any executor, so broker-local
disks work only when mounted on all executors (a shared mount or copies).

Work is split by segment file, so one huge partition is many tasks.

Output: the human summary, or --json: findings {"type": "finding", "broker",
"log_dir", "topic", "partition", "file", "position", "end", "offset", "kind",
"severity", "message"} (verify's kinds, plus offset_gap, orphaned_replica,
missing_replica, unreadable and the stored-config kinds above), divergences {"type": "divergence", "topic", "partition",
"brokers", "log_dirs", "offset", "epochs", "crcs", "base_offsets",
"last_offsets"}, then {"type": "partition_size", "topic", "partition",
"broker", "size"} per replica (orphans excluded), then a summary.  The
--json output, or partition_sizes.jsonl, feeds `reassign generate --strategy
size --sizes FILE` as is.  --output DIR receives
Parquet tables segments/ (one row per segment), findings/, partitions/
(per topic-partition), replicas/ (per partition copy), brokers/, gaps/,
divergences/, plus
partition_sizes.jsonl and summary.json.

Progress: on a terminal, a live line on stderr (the scan's stage, segments
verified of the total, bytes, Spark's active stages and their tasks); with
--json, progress events {"type": "progress", "stage", "segments_done",
"segments_total", "bytes_done", "bytes_total", "spark_stages": [{"id",
"name", "tasks", "done", "active"}], "elapsed_s"} as JSON lines on stderr
(stdout keeps the report).  Ctrl-C (SIGINT) cancels the Spark jobs and stops
with one line (exit 130); a second Ctrl-C stops at once.

Read-only.  Findings: corruption and replica divergence, at or above --fail-on.
A path that is not a log dir is an input error, found before Spark starts."""


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        name="fleet",
        help="Fleet-wide scans of Kafka log dirs on Apache Spark.",
        no_args_is_help=True,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    sub.command("scan", help=SCAN_HELP, short_help="Verify a fleet's log dirs with Spark.")(scan)
    sub.command("zip", short_help="Write the kafkatool package as a zip for spark-submit --py-files.")(
        make_zip
    )
    app.add_typer(sub, name="fleet", short_help="Fleet-wide scans on Apache Spark.")


@handle_errors
def make_zip(
    dest: Path = typer.Argument(Path("kafkatool.zip"), metavar="FILE", help="Where to write the zip."),
) -> None:
    """Write the kafkatool package as a zip for `spark-submit --py-files` (written aside, then renamed)."""
    from kafkatool.fleet.package import build_zip

    path = build_zip(dest)
    console.print(f"wrote {path}")


@handle_errors
def scan(
    log_dirs: list[Path] = typer.Argument(
        None, metavar="[LOGDIR]...", help="Log dirs to scan (besides the inventory's)."
    ),
    inventory: Path = typer.Option(
        None, "--inventory", "-i", metavar="FLEET.json", help="The fleet inventory."
    ),
    master: str = typer.Option(
        None,
        "--master",
        metavar="URL",
        help="Spark master: local[N] (default local[*]), spark://..., yarn, k8s://...",
    ),
    output: Path = typer.Option(
        None, "--output", "-o", metavar="DIR", help="Write Parquet tables and JSON here."
    ),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    quick: bool = typer.Option(
        False, "--quick", help="Check batch headers and CRCs only; skip record decoding (as verify --quick)."
    ),
    fail_on: str = fail_on_option(),
    conf: list[str] = typer.Option(
        None, "--conf", metavar="KEY=VALUE", help="Extra Spark settings (repeatable)."
    ),
) -> None:
    from kafkatool.fleet import inventory as I
    from kafkatool.fleet import job

    failing(fail_on)  # checked before Spark starts
    if inventory is None and not log_dirs:
        raise CommandError("give --inventory FLEET.json or one or more LOGDIR")
    inv = I.load_inventory(inventory) if inventory is not None else I.Inventory([])
    if log_dirs:
        inv.log_dirs += I.from_paths([str(p) for p in log_dirs]).log_dirs
    if master is None or master.startswith("local"):
        from kafkatool.log.manager import resolve_path

        for spec in inv.log_dirs:
            # the one rule for what a path names, before Spark spends its start-up on it
            log_dir, _ = resolve_path(spec.path)
            if log_dir != Path(spec.path).resolve():
                raise CommandError(f"{spec.path}: a partition dir, not a log dir (scan {log_dir})")
    extra = {}
    for item in conf or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--conf")
        extra[key] = value
    from pyspark.sql import SparkSession

    # inside a running Spark application (a notebook, spark-submit): use its session, leave it running
    owned = SparkSession.getActiveSession() is None
    try:
        spark = job.make_spark(master, conf=extra)
    except Exception as exc:  # a missing java, a bad master URL: pyspark's own exception types
        raise CommandError(f"cannot start Spark ({master or job.LOCAL_DEFAULT}): {_last_line(exc)}") from None
    interrupted = threading.Event()

    def on_sigint(signum, frame) -> None:
        # Ctrl-C: cancel the Spark jobs from another thread (the main thread is inside a py4j
        # call); the running stage then fails and the scan stops with one line. A second
        # Ctrl-C interrupts at once.
        if interrupted.is_set():
            raise KeyboardInterrupt
        interrupted.set()
        threading.Thread(target=_cancel_jobs, args=(spark,), daemon=True).start()

    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, on_sigint) if in_main else None
    reporter = _progress_reporter(json_out)
    try:
        res = job.run_scan(
            spark,
            inv,
            deep=not quick,
            output=str(output) if output is not None else None,
            progress=reporter,
            should_stop=interrupted.is_set,
        )
    except job.ScanInterrupted:
        raise CommandError(
            "interrupted: the Spark jobs were cancelled; no report" + (" and no output" if output else ""),
            code=EXIT_INTERRUPTED,
        ) from None
    except Exception as exc:
        if type(exc).__module__.startswith(("py4j", "pyspark")):
            # a task failed on an executor (e.g. a path it cannot read): the root cause, in one line
            raise CommandError(f"the Spark job failed: {_last_line(exc)}") from None
        raise
    finally:
        if reporter is not None:
            reporter.close()
        if in_main:
            signal.signal(signal.SIGINT, previous)
        if owned:
            spark.stop()
    if json_out:
        for obj in job.json_lines(res):
            emit_json(obj)
    else:
        _render(res, output)
    raise typer.Exit(EXIT_FINDINGS if job.failed(res, fail_on) else EXIT_OK)


def _cancel_jobs(spark) -> None:
    try:
        spark.sparkContext.cancelAllJobs()
    except Exception:
        pass  # the context is already stopping


class _JsonProgress:
    """Progress events as JSON lines on stderr (stdout keeps the report): at every stage change
    and at most once a second otherwise."""

    def __init__(self):
        self.last = None
        self.last_t = 0.0

    def __call__(self, ev: dict) -> None:
        key = (ev["stage"], ev["segments_done"], tuple((s["id"], s["done"]) for s in ev["spark_stages"]))
        now = time.monotonic()
        changed_stage = self.last is None or ev["stage"] != self.last[0]
        if key == self.last or (not changed_stage and now - self.last_t < 1.0):
            return
        self.last, self.last_t = key, now
        sys.stderr.write(json.dumps(ev) + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        pass


class _TerminalProgress:
    """A live line on a terminal's stderr: scan stage, segments done/total, bytes, Spark stages."""

    def __init__(self):
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(
            TextColumn("[bold cyan]{task.fields[stage]:<9}[/]"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} segments"),
            TextColumn("{task.fields[bytes]}"),
            TextColumn("[dim]{task.fields[spark]}[/]"),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
        )
        self.task = self.bar.add_task("scan", total=None, stage="start", bytes="", spark="")
        self.bar.start()

    def __call__(self, ev: dict) -> None:
        spark = ", ".join(f"spark stage {s['id']} {s['done']}/{s['tasks']} tasks" for s in ev["spark_stages"])
        self.bar.update(
            self.task,
            total=ev["segments_total"] or None,
            completed=ev["segments_done"],
            stage=ev["stage"],
            bytes=f"{_mb(ev['bytes_done'])} of {_mb(ev['bytes_total'])}" if ev["bytes_total"] else "",
            spark=spark,
        )

    def close(self) -> None:
        self.bar.stop()


def _progress_reporter(json_out: bool):
    if json_out:
        return _JsonProgress()
    if sys.stderr.isatty():
        return _TerminalProgress()
    return None


def _broker(b) -> str:
    """A broker id for the human view ("broker None" means nothing to an operator)."""
    return "unknown" if b is None else str(b)


def _last_line(exc: Exception) -> str:
    """The innermost error of a Spark failure (the Python worker's traceback ends with it)."""
    lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
    for x in reversed(lines):
        if "Error:" in x or "Exception:" in x:
            return x
    return lines[-1] if lines else type(exc).__name__


_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 1e5 else f"{n:,} B"


def _render(res, output: Path | None) -> None:
    s = res.summary
    t = Table(title="Brokers", header_style="bold")
    for col in ("broker", "host", "rack", "partitions", "segments", "records", "size", "corrupt segments"):
        t.add_column(col, justify="right" if col not in ("host", "rack") else "left")
    for b in res.brokers:
        t.add_row(
            _broker(b["broker"]),
            b["host"] or "",
            b["rack"] or "",
            str(b["partitions"]),
            str(b["segments"]),
            f"{b['records']:,}",
            _mb(b["bytes"]),
            f"[bold red]{b['corrupt_segments']}[/]" if b["corrupt_segments"] else "0",
        )
    console.print(t)
    top = sorted(res.partitions, key=lambda p: -p["size"])[:10]
    if top:
        t = Table(title=f"Largest partitions (of {len(res.partitions)})", header_style="bold")
        for col in ("partition", "replicas", "size", "records", "log end offsets"):
            t.add_column(col)
        for p in top:
            leos = p["log_end_offsets"]
            lag = "" if len(set(leos.values())) <= 1 else " [yellow](differ)[/]"
            t.add_row(
                f"{p['topic']}-{p['partition']}",
                ",".join(_broker(b) for b in p["replicas"])
                + (f" (+orphans {p['orphans']})" if p["orphans"] else ""),
                _mb(p["size"]),
                f"{p['records']:,}",
                " ".join(f"{_broker(b)}:{o}" for b, o in leos.items()) + lag,
            )
        console.print(t)
    if res.corrupt_segments:
        t = Table(title="Corrupt segments", header_style="bold")
        for col in ("broker", "file", "size", "valid to byte", "damaged byte ranges"):
            t.add_column(col, overflow="fold")
        for c in res.corrupt_segments:
            t.add_row(
                _broker(c["broker"]),
                c["file"],
                str(c["bytes"]),
                str(c["valid_end"]),
                "; ".join(f"[{a}, {b}) {k}" for a, b, k in c["damage"]),
            )
        console.print(t)
    if res.divergences:
        t = Table(title="Replica divergence", header_style="bold")
        for col in ("partition", "brokers", "first diverging offset", "epochs", "CRCs"):
            t.add_column(col)
        for d in res.divergences:
            t.add_row(
                f"{d['topic']}-{d['partition']}",
                " vs ".join(_broker(b) for b in d["brokers"]),
                str(d["offset"]),
                " vs ".join(str(e) for e in d["epochs"]),
                " vs ".join("-" if c is None else f"{c:#010x}" for c in d["crcs"]),
            )
        console.print(t)
    if res.gaps:
        t = Table(title="Offset gaps between segments", header_style="bold")
        for col in ("broker", "partition", "missing offsets", "before file", "compacted"):
            t.add_column(col, overflow="fold")
        for g in res.gaps:
            t.add_row(
                _broker(g["broker"]),
                f"{g['topic']}-{g['partition']}",
                f"{g['from_offset']}..{g['to_offset']} ({g['missing']})",
                g["file"],
                "yes" if g["compacted"] else "no",
            )
        console.print(t)
    if s["codecs"]:
        total = sum(s["codecs"].values()) or 1
        console.print(
            "codecs (share of segment bytes): "
            + ", ".join(
                f"{c} {100 * n / total:.0f}%" for c, n in sorted(s["codecs"].items(), key=lambda x: -x[1])
            )
        )
    for f in res.findings:
        where = (f["file"] or f"{f['topic']}-{f['partition']}") + (
            f" @ byte {f['position']}" if f["position"] is not None else ""
        )
        span = f" (to byte {f['end']})" if f["end"] is not None and f["position"] is not None else ""
        off = f" offset {f['offset']}" if f["offset"] is not None else ""
        console.print(
            f"[{_STYLE[f['severity']]}]{f['severity']:7}[/] "
            + (f"broker {f['broker']} " if f["broker"] is not None else f"log dir {f.get('log_dir') or '?'} ")
            + f"{where}{span}{off}: "
            f"[bold]{f['kind']}[/] {f['message']}"
        )
    bad = s["errors"] or s["divergent_partitions"]
    status = "[bold red]problems found[/]" if bad else "[green]clean[/]"
    console.print(
        f"fleet scan: {s['log_dirs']} log dirs, {s['brokers']} brokers, {s['partitions']} partitions "
        f"({s['replicas']} copies), {s['segments']} segments, {s['records']:,} records, {_mb(s['bytes'])}: "
        f"{s['corrupt_segments']} corrupt segments, {s['divergent_partitions']} divergent partitions, "
        f"{s['offset_gaps']} offset gaps, {s['orphaned_replicas']} orphaned replicas; "
        f"{s['errors']} errors, {s['warnings']} warnings, {s['infos']} notes; {status}"
    )
    if output is not None:
        err_console.print(f"Parquet tables and partition_sizes.jsonl written to {output}")
