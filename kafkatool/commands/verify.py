"""``kafkatool verify``: check Kafka log files, partition dirs and whole log dirs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from kafkatool.commands.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    JSON_HELP,
    console,
    emit_json,
    fail_on_option,
    failing,
    handle_errors,
    progress,
)

if TYPE_CHECKING:
    from kafkatool.forensics import verify as V

HELP = """Check Kafka log data for corruption and inconsistency.

PATH is a segment or index file, a partition directory (topic-N) or a whole log
directory (every partition in it).  Checked: every batch's CRC (CRC-32C for
v2, CRC-32 for v0/v1 messages, inner messages of compressed wrappers too),
lengths, magic, offsets increasing and consistent with the file name and
across segments, record counts against lastOffsetDelta, timestamps, every
record (unless --quick), offset/time/transaction indexes against the log,
producer snapshots, checkpoints, meta.properties and partition.metadata.

Where Kafka's own recovery stops at the first corrupt batch, verify goes on:
it searches forward for the next valid batch, reports the damaged byte range
[position, end) and checks what lies beyond.  A truncated, garbage or
zero-filled tail is reported with the byte position where valid data ends.

Findings have a severity: error (data Kafka rejects or loses), warning (a
state Kafka repairs at start-up, or suspicious metadata), info (noted only).
Read-only: never modifies anything, safe on a running broker's log dir.

Noted (info), for instance: a record header key that is not valid UTF-8
(header_key_not_utf8, once per batch: the first such key's record offset, the
key's own byte position (in a compressed batch, in its decompressed records)
and bytes, and how many the batch holds).  Kafka accepts such a
key; a client reads it as Java's String(bytes, UTF_8), each malformed
sequence one U+FFFD.  The summary counts findings by severity and by kind.

A path that is neither Kafka files, a partition dir nor a log dir is an input
error."""


def register(app: typer.Typer) -> None:
    app.command("verify", help=HELP, short_help="Check log files, partitions or log dirs for corruption.")(
        verify
    )


@handle_errors
def verify(
    paths: list[Path] = typer.Argument(..., metavar="PATH...", help="Files, partition dirs or log dirs."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    quick: bool = typer.Option(
        False,
        "--quick",
        help="Check batch headers and CRCs only (what Kafka's recovery checks); skip record decoding.",
    ),
    fail_on: str = fail_on_option(),
    show_all: bool = typer.Option(
        False, "--all", help="List every file in the human view, not only those with findings."
    ),
) -> None:
    # the checker is imported when the command runs: `kafkatool --help` and other commands skip it
    from kafkatool.forensics import verify as V

    failing_set = failing(fail_on)
    for p in paths:
        if not p.exists():
            raise FileNotFoundError(2, "No such file or directory", str(p))
    totals = Counter()
    severities = Counter()
    kinds = Counter()
    rows = []
    with progress(V.total_log_bytes(paths), "verifying", enabled=not json_out) as advance:
        for p in paths:
            for res in V.verify_path(p, deep=not quick):
                totals["files"] += 1
                if res.kind == "log":
                    seg = res.segment
                    totals["segments"] += 1
                    totals["batches"] += seg.batches
                    totals["records"] += seg.records
                    totals["bytes"] += seg.size
                    advance(seg.size)
                for f in res.findings:
                    severities[f.severity] += 1
                    kinds[f.kind] += 1
                    if json_out:
                        emit_json(f.to_json())
                if not json_out and (res.findings or show_all):
                    rows.append(res)
    failed = any(severities[s] for s in failing_set)
    summary = {
        "type": "summary",
        "paths": [str(p) for p in paths],
        "files": totals["files"],
        "segments": totals["segments"],
        "batches": totals["batches"],
        "records": totals["records"],
        "bytes": totals["bytes"],
        "findings": sum(severities.values()),
        "errors": severities["error"],
        "warnings": severities["warning"],
        "infos": severities["info"],
        "kinds": dict(sorted(kinds.items())),
        "clean": not failed,
    }
    if json_out:
        emit_json(summary)
    else:
        _render(rows, summary, quick)
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_OK)


_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _render(rows: list[V.FileResult], summary: dict, quick: bool) -> None:
    if rows:
        table = Table(title="Files", show_lines=False, header_style="bold")
        for col in ("file", "kind", "bytes", "batches", "offsets", "valid to byte", "findings"):
            table.add_column(col, overflow="fold")
        for r in rows:
            seg = r.segment
            counts = Counter(f.severity for f in r.findings)
            badge = (
                ", ".join(f"[{_STYLE[s]}]{n} {s}{'s' if n > 1 else ''}[/]" for s, n in counts.items())
                or "[green]ok[/]"
            )
            table.add_row(
                r.file,
                r.kind,
                str(r.size),
                str(seg.batches) if seg else "",
                f"{seg.first_offset}..{seg.last_offset}" if seg and seg.first_offset is not None else "",
                str(seg.valid_end) if seg else "",
                badge,
            )
        console.print(table)
        for r in rows:
            for f in r.findings:
                where = f"{f.file}" + (f" @ byte {f.position}" if f.position is not None else "")
                span = f" (to byte {f.end})" if f.end is not None and f.position is not None else ""
                off = f" offset {f.offset}" if f.offset is not None else ""
                console.print(
                    f"[{_STYLE[f.severity]}]{f.severity:7}[/] {where}{span}{off}: [bold]{f.kind}[/] {f.message}"
                )
    mode = "headers and CRCs" if quick else "full"
    status = "[green]clean[/]" if summary["clean"] else "[bold red]findings[/]"
    console.print(
        f"verify ({mode}): {summary['files']} files, {summary['segments']} segments, {summary['batches']} batches, "
        f"{summary['records']} records, {summary['bytes']} bytes: {summary['errors']} errors, "
        f"{summary['warnings']} warnings, {summary['infos']} notes; {status}"
    )
