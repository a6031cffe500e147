"""``kafkatool metadata-shell``: kafka-metadata-shell.sh over a KRaft metadata snapshot, log
segment or ``__cluster_metadata-0`` dir."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from kafkatool.commands.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    error_line,
    handle_errors,
)

HELP = """Show the metadata a KRaft cluster's __cluster_metadata log adds up to, as Kafka 3.7's
kafka-metadata-shell.sh does: a file tree of the metadata image.

--snapshot FILE is kafka-metadata-shell.sh's --snapshot: one file's records (a snapshot,
NNN-EPOCH.checkpoint, or a log segment, NNN.log) replayed from an empty image.  --directory DIR
(kafkatool's; Kafka 3.7 has only --snapshot) loads a __cluster_metadata-0 dir as a broker does:
the latest snapshot, then the log's records after it; DIR may also be the log dir holding it.
Read-only: no lock is taken and nothing is written, so a live broker's dir or a backup both do.

COMMAND runs one command and exits: ls [PATH...], cat PATH..., tree PATH..., find [PATH...].
Without one, the shell reads commands (cd, pwd, ls, cat, tree, find, history, man, help, exit)
from the terminal with a ">> " prompt, or one per line from a pipe.  Paths and names are
Kafka's: /image/topics/byName/T/P, /image/topics/byId/ID, /image/cluster/brokers/N,
/image/configs/TOPIC:T, /image/configs/BROKER (the cluster default) and BROKER:N,
/image/features, /image/clientQuotas, /image/producerIds, /image/acls/ID, /image/scram,
/image/delegationToken, /image/provenance, /local; each component may be a glob (*, ?, {a,b}).
cat prints a partition as Kafka's PartitionRegistration(...), a broker as its
BrokerRegistration(...).  SCRAM credentials and delegation tokens are shown as [redacted], and
so is a config value Kafka calls sensitive (a password, or a config it does not know), as
Kafka's redacting printers do (Kafka 3.7's shell prints them).  With --json each result is one
JSON object per line.

A damaged file (an impossible entry, a CRC mismatch, a torn tail) stops the reading there: one
line on stderr names the file, the batch offset and byte position and the offset the image
holds the records up to; the command then runs on that image and the exit status is 1.  A
record the image cannot apply (Kafka's loader logs and skips it) is a line on stderr and exit 1
too; a target that is not in the tree is exit 1 (the line is Kafka's: cat: P: No such file or
directory.); an unknown command is exit 2."""

#: the longest command line the shell reads (a longer one is refused, not buffered)
MAX_LINE = 65536
#: skipped-record lines printed before the rest are counted
MAX_NOTES = 20


def register(app: typer.Typer) -> None:
    app.command(
        "metadata-shell",
        help=HELP,
        short_help="Browse a KRaft metadata snapshot or log as kafka-metadata-shell.sh does.",
    )(metadata_shell)


def _redaction():
    """Kafka's MetadataNodeRedactionCriteria.Normal: SCRAM and delegation tokens masked, a config
    masked when KafkaConfigSchema.isSensitive (a PASSWORD, or a name the schema does not know)."""
    from kafkatool.broker import config as C
    from kafkatool.formats.metadata_image import Redaction
    from kafkatool.log import topic_settings as ts

    client_metrics = {"metrics", "interval.ms", "match"}

    def sensitive(resource_type: int, name: str) -> bool:
        if resource_type == 2:
            d = ts.TOPIC_CONFIGS.get(name)
            return d is None or d.type == ts.PASSWORD
        if resource_type == 4:
            kind = C.config_type(name)
            return kind is None or kind == C.PASSWORD
        if resource_type == 16:
            return name not in client_metrics
        return True

    return Redaction(scram=True, delegation_token=True, config=sensitive)


def _load(snapshot: Path | None, directory: Path | None):
    from kafkatool.log.manager import METADATA_TOPIC_DIR
    from kafkatool.log.metadata_log import load_directory, load_file

    if (snapshot is None) == (directory is None):
        raise CommandError("give one of --snapshot FILE or --directory DIR")
    if snapshot is not None:
        if snapshot.is_dir():
            raise CommandError(f"{snapshot}: is a directory (--directory reads a __cluster_metadata-0 dir)")
        return snapshot, load_file(snapshot)
    if not directory.is_dir():
        raise CommandError(f"{directory}: not a directory")
    if (directory / METADATA_TOPIC_DIR).is_dir():
        directory = directory / METADATA_TOPIC_DIR
    load = load_directory(directory)
    if not load.files:
        raise CommandError(f"{directory}: no KRaft metadata snapshot (*.checkpoint) or log segment (*.log)")
    return directory, load


def _report(source: Path, load) -> bool:
    """The load's damage and skipped records on stderr; True when there was any."""
    if load.damage is not None and load.batches == 0 and load.damage.position == 0:
        raise CommandError(
            f"{load.damage.file}: not a KRaft metadata file: {load.damage.reason} (byte position 0)"
        )
    if load.damage is not None:
        error_line(load.damage.line())
    for gap in load.gaps:
        error_line(gap)
    for note in load.notes[:MAX_NOTES]:
        error_line(f"record skipped: {note}")
    if len(load.notes) > MAX_NOTES:
        error_line(f"{len(load.notes) - MAX_NOTES} more records skipped")
    if load.pending:
        sys.stderr.write(
            f"kafkatool: note: {source}: {load.pending} records of a metadata transaction that has not "
            "ended are not in the image\n"
        )
    return load.damage is not None or bool(load.notes) or bool(load.gaps)


@handle_errors
def metadata_shell(
    command: list[str] = typer.Argument(
        None, metavar="[COMMAND [ARG...]]", help="One command to run (ls, cat, tree, find); none: the shell."
    ),
    snapshot: Path = typer.Option(
        None,
        "--snapshot",
        "-s",
        help="A snapshot (.checkpoint) or log segment (.log) to read, as Kafka's -s.",
    ),
    directory: Path = typer.Option(
        None,
        "--directory",
        "-d",
        help="A __cluster_metadata-0 dir (or the log dir holding it): snapshot + log.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print each result as one JSON object per line."),
) -> None:
    from kafkatool import __version__
    from kafkatool.forensics.metadata_shell import Shell
    from kafkatool.formats.metadata_image import root_node

    source, load = _load(snapshot, directory)
    damaged = _report(source, load)
    root = root_node(load.image, {"version": __version__, "commitId": "unknown"})
    if command:
        shell = Shell(root, _redaction(), sys.stdout, json_mode=as_json)
        shell.err = sys.stderr
        shell.run(command)
        sys.stdout.flush()
        if shell.refused:
            raise typer.Exit(EXIT_USAGE)
        raise typer.Exit(EXIT_FINDINGS if damaged or shell.missed else EXIT_OK)
    _interactive(Shell(root, _redaction(), sys.stdout, json_mode=as_json, interactive=True))
    raise typer.Exit(EXIT_FINDINGS if damaged else EXIT_OK)


class _BoundedLines:
    """stdin for cmd.Cmd, one line at most MAX_LINE + 1 characters (the rest of a longer line
    is read and dropped, so it is refused as one line)."""

    def __init__(self, stream):
        self.stream = stream

    def readline(self) -> str:
        line = self.stream.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE and not line.endswith("\n"):
            while True:
                rest = self.stream.readline(MAX_LINE)
                if not rest or rest.endswith("\n"):
                    break
        return line


def _interactive(shell) -> None:
    import cmd
    import shlex
    import shutil

    from kafkatool.forensics.metadata_shell import COMMANDS

    tty = sys.stdin.isatty() and sys.stdout.isatty()
    shell.width = lambda: shutil.get_terminal_size().columns if tty else None

    class Prompt(cmd.Cmd):
        prompt = ">> " if tty else ""

        def preloop(self) -> None:
            if tty:
                try:
                    import readline

                    readline.set_completer_delims(" \t\n")
                except ImportError:  # pragma: no cover - a Python built without readline
                    pass

        def onecmd(self, line: str) -> bool:
            if line == "EOF":  # cmd.Cmd's end of input (Ctrl-D)
                if tty:
                    sys.stdout.write("\n")
                return True
            if len(line) > MAX_LINE:
                sys.stdout.write(f"line longer than {MAX_LINE} characters: not run\n")
                return False
            try:
                words = shlex.split(line)
            except ValueError as exc:
                sys.stdout.write(f"{exc}\n")
                return False
            if line.strip():
                shell.history.append(line.strip())
            done = shell.run(words)
            sys.stdout.flush()
            return done

        def emptyline(self) -> bool:
            return False

        def completenames(self, text, *ignored):
            return [n for n in COMMANDS if n.startswith(text)]

        def completedefault(self, text, line, begidx, endidx):
            return shell.complete_path(text)

    prompt = Prompt(stdin=_BoundedLines(sys.stdin))
    prompt.use_rawinput = tty
    intro = None
    if tty:
        sys.stdout.write("Loading...\nStarting...\n")
        intro = "[ Kafka Metadata Shell ]"
    while True:
        try:
            prompt.cmdloop(intro)
            return
        except KeyboardInterrupt:
            sys.stdout.write("^C\n")
            intro = None
