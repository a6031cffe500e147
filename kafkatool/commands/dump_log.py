"""``kafkatool dump-log``: kafka-dump-log.sh, with JSON output and forensic filters."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from kafkatool.commands.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    emit_json,
    error_line,
    handle_errors,
)
from kafkatool.forensics import DEFAULT_MAX_MESSAGE_SIZE, INT32_MAX

HELP = """Print the contents of Kafka log files, as kafka-dump-log.sh does.

FILE is a segment (.log), an offset index (.index), a time index
(.timeindex), a transaction index (.txnindex), a producer snapshot
(.snapshot), a KRaft snapshot (.checkpoint) or a checkpoint file
(recovery-point-offset-checkpoint, leader-epoch-checkpoint, ...).  The batch
and record lines use kafka-dump-log.sh's field names and layout, so scripts
that grep its output keep working; its error reports (index mismatches,
non-consecutive offsets) go to stderr at the end as Kafka prints them.

With --json every batch, record and index entry is one JSON object per line
({"type": "batch", ...}, {"type": "record", ...}); keys, values and header
values are rendered by --decoder (base64 by default under --json, utf8
otherwise); null stays null.  utf8 text and header keys are the Java String
Kafka makes of the bytes (one U+FFFD for each sequence that is not UTF-8, as
kafka-dump-log.sh prints them); a record whose header keys are not all UTF-8
also carries their bytes under --json, as hex in "headerKeysHex".

Findings: invalid bytes, index mismatches, undecodable records; a named file
that is not a Kafka file is an input error (Kafka's "Ignoring unknown file"
line is still printed)."""

_DECODER_CLASSES = {
    "kafka.serializer.StringDecoder": "utf8",
    "org.apache.kafka.tools.api.StringDecoder": "utf8",
    "kafka.serializer.DefaultDecoder": "hex",
    "org.apache.kafka.tools.api.DefaultDecoder": "hex",
}


def register(app: typer.Typer) -> None:
    app.command("dump-log", help=HELP, short_help="Print log segments, indexes, snapshots and checkpoints.")(
        dump_log
    )


def _decoder(name: str | None, option: str) -> str | None:
    from kafkatool.forensics import dump as D

    if name is None:
        return None
    name = _DECODER_CLASSES.get(name, name)
    if name not in D.DECODERS:
        raise typer.BadParameter(f"{name!r}: choose from {', '.join(D.DECODERS)}", param_hint=option)
    return name


def _offset_range(text: str | None) -> tuple[int | None, int | None]:
    if not text:
        return None, None
    lo, sep, hi = text.partition("-") if "-" in text else text.partition(":")
    try:
        low = int(lo) if lo.strip() else None
        high = int(hi) if hi.strip() else (None if sep else low)
    except ValueError:
        raise typer.BadParameter(
            "expected FIRST-LAST, FIRST- or -LAST (offsets)", param_hint="--offset-range"
        ) from None
    if low is not None and high is not None and high < low:
        raise typer.BadParameter("the last offset is below the first", param_hint="--offset-range")
    return low, high


@handle_errors
def dump_log(
    files: list[Path] = typer.Argument(None, metavar="FILE...", help="Files to dump."),
    files_opt: str = typer.Option(None, "--files", help="Comma-separated files (kafka-dump-log.sh's form)."),
    deep_iteration: bool = typer.Option(
        False, "--deep-iteration", help="Print every record, not only batch headers."
    ),
    print_data_log: bool = typer.Option(
        False, "--print-data-log", help="Print record keys and values (implies --deep-iteration)."
    ),
    decoder: str = typer.Option(
        None, "--decoder", help="Render keys, values and headers as utf8, hex, base64 or json."
    ),
    key_decoder: str = typer.Option(
        None, "--key-decoder", "--key-decoder-class", help="Decoder for keys only."
    ),
    value_decoder: str = typer.Option(
        None, "--value-decoder", "--value-decoder-class", help="Decoder for values and header values only."
    ),
    offsets_decoder: bool = typer.Option(
        False,
        "--offsets-decoder",
        help="Decode __consumer_offsets records (group metadata and committed offsets).",
    ),
    transaction_log_decoder: bool = typer.Option(
        False, "--transaction-log-decoder", help="Decode __transaction_state records."
    ),
    cluster_metadata_decoder: bool = typer.Option(
        False, "--cluster-metadata-decoder", help="Decode KRaft __cluster_metadata records."
    ),
    skip_record_metadata: bool = typer.Option(
        False, "--skip-record-metadata", help="Print only keys and values on record lines."
    ),
    max_bytes: int = typer.Option(
        INT32_MAX, "--max-bytes", help="Read at most this many bytes of each .log file."
    ),
    max_message_size: int = typer.Option(
        DEFAULT_MAX_MESSAGE_SIZE,
        "--max-message-size",
        help="Largest batch expected when checking .index entries.",
    ),
    index_sanity_check: bool = typer.Option(
        False, "--index-sanity-check", help="Only run Kafka's start-up sanity check on index files."
    ),
    verify_index_only: bool = typer.Option(
        False, "--verify-index-only", help="Check index entries against the log without printing them."
    ),
    offset_range: str = typer.Option(
        None, "--offset-range", metavar="FIRST-LAST", help="Only batches and records in this offset range."
    ),
    key: str = typer.Option(
        None, "--key", help="Only records with this key (UTF-8; prefix hex: for hex bytes)."
    ),
    producer_id: int = typer.Option(None, "--producer-id", help="Only batches written by this producer id."),
    json_out: bool = typer.Option(
        False, "--json", help="One JSON object per line (batch, record, entry, problem)."
    ),
) -> None:
    # the readers are imported when the command runs: `kafkatool --help` and other commands skip them
    from kafkatool.forensics import dump as D

    paths = list(files or [])
    if files_opt:
        paths += [Path(f) for f in files_opt.split(",") if f]
    if not paths:
        raise CommandError("name at least one file (FILE... or --files)")
    special = [offsets_decoder, transaction_log_decoder, cluster_metadata_decoder]
    if sum(special) > 1:
        raise CommandError(
            "choose one of --offsets-decoder, --transaction-log-decoder, --cluster-metadata-decoder"
        )
    if max_bytes <= 0 or max_message_size <= 0:
        raise CommandError("--max-bytes and --max-message-size must be positive")
    base = _decoder(decoder, "--decoder") or ("base64" if json_out else "utf8")
    low, high = _offset_range(offset_range)
    key_bytes = None
    if key is not None:
        if key.startswith("hex:"):
            try:
                key_bytes = bytes.fromhex(key[4:])
            except ValueError:
                raise typer.BadParameter("hex: must be followed by hex digits", param_hint="--key") from None
        else:
            key_bytes = key.encode("utf-8")
    data_decoder = (
        "offsets"
        if offsets_decoder
        else "transaction-log"
        if transaction_log_decoder
        else "cluster-metadata"
        if cluster_metadata_decoder
        else None
    )
    print_data = (
        print_data_log
        or data_decoder is not None
        or decoder is not None
        or key_decoder is not None
        or value_decoder is not None
    )
    deep = deep_iteration or print_data
    opts = D.DumpOptions(
        deep_iteration=deep,
        print_data_log=print_data or (json_out and deep),
        key_decoder=_decoder(key_decoder, "--key-decoder") or base,
        value_decoder=_decoder(value_decoder, "--value-decoder") or base,
        data_decoder=data_decoder,
        skip_record_metadata=skip_record_metadata,
        max_bytes=max_bytes,
        max_message_size=max_message_size,
        index_sanity_check=index_sanity_check,
        verify_index_only=verify_index_only,
        offset_min=low,
        offset_max=high,
        key=key_bytes,
        producer_id=producer_id,
        structured=json_out,
    )
    status = {"code": EXIT_OK}
    deferred: list[dict] = []

    def on_error(exc: Exception, path: Path) -> None:
        status["code"] = EXIT_USAGE
        if isinstance(exc, OSError):
            msg = f"{exc.filename or path}: {exc.strerror or exc}"
        else:
            msg = f"{path}: {exc}" if str(path) not in str(exc) else str(exc)
        if json_out:
            emit_json({"type": "error", "file": str(path), "message": msg})
        error_line(msg)

    out = sys.stdout
    for ev in D.iter_dump(paths, opts, on_error):
        bad = ev["type"] in ("problem", "invalid_bytes") or (ev["type"] == "batch" and not ev["isvalid"])
        if bad and status["code"] == EXIT_OK:
            status["code"] = EXIT_FINDINGS
        if ev["type"] == "ignored":
            status["code"] = EXIT_USAGE  # not Kafka data: an input error, as everywhere
        if json_out:
            emit_json(ev)
            continue
        line = D.kafka_line(ev, opts)
        if line is not None:
            out.write(line)
            out.write("\n")
        if ev["type"] in ("problem", "ignored"):
            deferred.append(ev)
    if not json_out:
        out.flush()
        for ev in deferred:
            for line in D.kafka_stderr_lines(ev):
                sys.stderr.write(line + "\n")
    raise typer.Exit(status["code"])
