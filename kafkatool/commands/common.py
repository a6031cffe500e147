"""What every command shares: exit codes, JSON lines, one-line errors, progress."""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import typer
from rich.console import Console

from kafkatool.errors import KafkatoolError

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: The lowest finding severity that makes a check exit 1, the same for every command.
DEFAULT_FAIL_ON = "warning"

#: The one exit-code contract, appended to every command's help (and so to the man pages).
EXIT_CONTRACT = """Exit status, the same for every kafkatool command:

\b
  0    success: a check found nothing at or above --fail-on (default:
       warning); a change was made, or there was nothing to do
  1    findings: a check found problems at or above --fail-on; a --dry-run
       found something it would change; or a change was made but problems
       it does not fix remain in the data
  2    could not run: a usage error, input that is not Kafka data or not a
       regular file, a log dir a running broker holds, an unreachable
       cluster or ZooKeeper
  130  interrupted (Ctrl-C)"""


def fail_on_option():
    """The one declaration of --fail-on (verify, fleet scan, health)."""
    return typer.Option(
        DEFAULT_FAIL_ON,
        "--fail-on",
        metavar="SEVERITY",
        help="Lowest finding severity that makes the exit status 1: error or warning.",
    )


#: The environment variable that stands in for --zookeeper in every command that takes it.
ZOOKEEPER_ENV = "KAFKATOOL_ZOOKEEPER"
#: Options that name another source of what --zookeeper reads: when one of them is given, a
#: --zookeeper that only came from $KAFKATOOL_ZOOKEEPER is dropped (see _zookeeper_command).
ZOOKEEPER_ALTERNATIVES = ("--bootstrap-server", "--current")


def zookeeper_option(help: str):
    """The one declaration of --zookeeper/-z; each command says what it does there.
    $KAFKATOOL_ZOOKEEPER stands in for it; add_zookeeper_options says so in the help and
    applies the precedence rule."""
    return typer.Option(
        None,
        "--zookeeper",
        "-z",
        metavar="HOST:PORT[/CHROOT]",
        help=help,
        show_default=False,
        envvar=ZOOKEEPER_ENV,
        show_envvar=False,
    )


def zookeeper_timeout_option():
    """--timeout of the commands that also talk to a cluster (the zk commands have their own)."""
    return typer.Option(10.0, "--timeout", metavar="SECONDS", help="ZooKeeper connection timeout.")


def failing(fail_on: str) -> frozenset[str]:
    """--fail-on's value checked and turned into the severities that fail (exit 2 if bad)."""
    from kafkatool.forensics.verify import failing_severities

    try:
        return failing_severities(fail_on)
    except ValueError:
        raise typer.BadParameter("must be 'error' or 'warning'", param_hint="--fail-on") from None


def modify_exit(*, dry_run: bool, would_change: bool, remaining: bool) -> int:
    """The contract for commands that modify data: what a --dry-run would change is a
    finding; a real run that did its work succeeds unless problems remain."""
    if remaining or (dry_run and would_change):
        return EXIT_FINDINGS
    return EXIT_OK


JSON_HELP = "Print one JSON object per line instead of the human view."

# Not a terminal (a pipe, a file, CI): do not squeeze tables into 80 columns.
console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


class CommandError(KafkatoolError):
    """A problem with the command's input: reported as one line, exit 2."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code


def emit_json(obj: dict) -> None:
    """One JSON object per line on stdout."""
    sys.stdout.write(json.dumps(obj, separators=(", ", ": "), ensure_ascii=False, default=str))
    sys.stdout.write("\n")


def error_line(message: str) -> None:
    # Plain write: rich would wrap long paths and mangle brackets.
    sys.stderr.write(f"kafkatool: error: {message}\n")
    sys.stderr.flush()


def handle_errors(func: Callable) -> Callable:
    """Turn library exceptions into one line on stderr and a documented exit code."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except typer.Exit:
            raise
        except CommandError as exc:
            error_line(str(exc))
            raise typer.Exit(exc.code) from None
        except BrokenPipeError:
            # The reader went away (| head): stop quietly, as cat does.
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(EXIT_OK) from None
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            error_line(f"{where}{exc.strerror or exc}")
            raise typer.Exit(EXIT_USAGE) from None
        except KafkatoolError as exc:
            # the project's one error tree: bad bytes (with their position), settings,
            # ZooKeeper, assignment ... all one line and the contract's "could not run"
            error_line(str(exc))
            raise typer.Exit(EXIT_USAGE) from None
        except KeyboardInterrupt:
            error_line("interrupted")
            raise typer.Exit(130) from None

    return wrapper


@contextlib.contextmanager
def progress(total: int | None, description: str, *, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr (only when stderr is a terminal); yields advance(n)."""
    if not enabled or not sys.stderr.isatty():
        yield lambda n=1: None
        return
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n=1: bar.advance(task, n)


def group_targets(resolve, paths: list[Path]) -> dict[Path, list[Path]]:
    """PATH... -> {log dir: partition dirs}, each partition once, in the order given."""
    groups: dict[Path, list[Path]] = {}
    seen: set[Path] = set()
    for path in paths:
        log_dir, parts = resolve(path)
        bucket = groups.setdefault(log_dir, [])
        for part in parts:
            key = part.resolve()
            if key not in seen:
                seen.add(key)
                bucket.append(part)
    return groups


# ----------------------------------------------------------------------------- help: names, not types
#: value names for option names that recur across commands (the rest: by type, see _metavar)
_METAVARS = {
    "zookeeper": "HOST:PORT[/CHROOT]",
    "bootstrap_server": "HOST:PORT[,HOST:PORT]",
    "override": "KEY=VALUE",
    "timeout": "SECONDS",
    "stale_after": "SECONDS",
    "now": "TIME",
    "log_format": "text|json",
    "log_level": "LEVEL",
    "output": "FILE",
    "config": "FILE",
    "types": "TYPE",
    "fail_on": "SEVERITY",
}


def _metavar(name: str, annotation) -> str:
    import typing
    from pathlib import Path

    if name in _METAVARS:
        return _METAVARS[name]
    args = typing.get_args(annotation)
    base = next((a for a in args if a is not type(None)), annotation) if args else annotation
    if typing.get_origin(base) is list:
        (base,) = typing.get_args(base) or (str,)
    if name.endswith("_ms"):
        return "MS"
    if name.endswith(("_bytes", "_size")):
        return "BYTES"
    if base is Path:
        return "PATH"
    if base is int:
        return "N"
    if base is float:
        return "NUMBER"
    return name.upper().replace("_", "-")


def name_metavars(app: typer.Typer) -> None:
    """Give every option and argument of every command a value name (``--timeout SECONDS``,
    ``FILE``) where it has none, so that help and usage never show Python types
    (``<list[str]>``, ``<float range>``)."""
    import inspect
    import typing

    from typer.models import ArgumentInfo, OptionInfo

    def fix(callback) -> None:
        if callback is None:
            return
        hints = typing.get_type_hints(callback)
        for pname, param in inspect.signature(callback).parameters.items():
            info = param.default
            ann = hints.get(pname)
            if isinstance(info, OptionInfo):
                if info.metavar is None and ann is not bool and not getattr(info, "is_flag", None):
                    info.metavar = _metavar(pname, ann)
            elif isinstance(info, ArgumentInfo) and info.metavar is None:
                info.metavar = pname.upper().replace("_", "-")

    def walk(t: typer.Typer) -> None:
        fix(t.registered_callback.callback if t.registered_callback else None)
        for c in t.registered_commands:
            fix(c.callback)
        for g in t.registered_groups:
            walk(g.typer_instance)

    walk(app)


def apply_exit_contract(app: typer.Typer) -> None:
    """Append :data:`EXIT_CONTRACT` to the help of every command and group."""

    def add(info) -> None:
        # a docstring's continuation lines carry the code's indent: dedented as click dedents
        # the docstrings it reads itself (inspect.cleandoc)
        text = inspect.cleandoc(
            info.help or (info.callback.__doc__ if getattr(info, "callback", None) else "") or ""
        ).rstrip()
        if EXIT_CONTRACT not in text:
            info.help = f"{text}\n\n{EXIT_CONTRACT}" if text else EXIT_CONTRACT

    def walk(t: typer.Typer) -> None:
        for c in t.registered_commands:
            add(c)
        for g in t.registered_groups:
            walk(g.typer_instance)

    walk(app)


# ----------------------------------------------------------------------------- --property
def property_args(items: list[str] | None, option: str = "--property") -> dict[str, str]:
    """The console tools' ``--property KEY=VALUE`` and ``--producer-property`` / ``--consumer-property``
    (repeatable; CommandLineUtils.parseKeyValueArgs: split at the first '=', the value may hold
    more). An item without '=' is refused (Kafka takes it as an empty value, which silently turns a
    ``print.key`` into false): one line naming ``option``."""
    out: dict[str, str] = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise CommandError(f"{option} {item!r}: expected KEY=VALUE")
        out[k.strip()] = v
    return out


# ----------------------------------------------------------------------------- --command-config
COMMAND_CONFIG_HELP = (
    "Kafka client properties for --bootstrap-server connections, as Kafka's tools take them: "
    "security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), sasl.mechanism (PLAIN, "
    "SCRAM-SHA-256, SCRAM-SHA-512), sasl.jaas.config or sasl.username/sasl.password, ssl.truststore.*, "
    "ssl.keystore.* (PEM or PKCS12), ssl.endpoint.identification.algorithm."
)


def _load_command_config(value):
    from kafkatool.assign import kafka_client

    if value is None:  # click calls back for an absent option too: PLAINTEXT
        kafka_client.use_client_security(None)
        return None
    import typer

    from kafkatool.broker.config import ConfigError
    from kafkatool.broker.security.client import ClientSecurity

    try:
        kafka_client.use_client_security(ClientSecurity.from_file(value))
    except ConfigError as exc:
        raise typer.BadParameter(f"{value}: {exc}") from None
    return value


def add_client_security(security: dict[str, str], what: str) -> None:
    """Security configs given among a console tool's client configs (security.protocol, ssl.*,
    sasl.*), as Kafka's clients take them: over --command-config's, for every connection."""
    if not security:
        return
    from kafkatool.assign import kafka_client
    from kafkatool.broker.config import ConfigError
    from kafkatool.broker.security.client import ClientSecurity

    given = kafka_client.client_security()
    try:
        kafka_client.use_client_security(
            ClientSecurity({**(given.props if given is not None else {}), **security})
        )
    except ConfigError as exc:
        raise CommandError(f"{what}: {exc}") from None


def load_properties_file(path, option: str) -> dict[str, str]:
    """Utils.loadProps: a Java properties file (ISO-8859-1); an unreadable or malformed file is
    one line naming ``option`` and the file."""
    from kafkatool.formats import properties as P
    from kafkatool.formats.errors import FormatError

    try:
        with open(path, "rb") as f:
            text = f.read().decode("latin-1")
    except OSError as exc:
        raise CommandError(f"{option} {path}: {exc.strerror or exc}") from None
    try:
        return P.parse_properties_text(text)
    except FormatError as exc:
        raise CommandError(f"{option} {path}: {exc}") from None


def command_config_option(*aliases: str, help: str = COMMAND_CONFIG_HELP):
    """The one declaration of --command-config: every command with --bootstrap-server takes it
    (``aliases``: the name the Kafka tool a command follows gives it, e.g. --config-file)."""
    import typer

    return typer.Option(
        None,
        "--command-config",
        *aliases,
        metavar="FILE",
        help=help,
        callback=_load_command_config,
        show_default=False,
    )


# ----------------------------------------------------------------------------- --zk-tls-config-file
ZK_TLS_CONFIG_HELP = (
    "ZooKeeper client TLS properties with Kafka's names, as Kafka's ZooKeeper tools take them: "
    "zookeeper.ssl.client.enable, zookeeper.ssl.keystore.location/password/type (PEM or PKCS12), "
    "zookeeper.ssl.truststore.*, zookeeper.ssl.endpoint.identification.algorithm, zookeeper.set.acl "
    "(other names are ignored). SASL comes from the JAAS Client section named by "
    "-Djava.security.auth.login.config in KAFKA_OPTS, as for Kafka's scripts."
)


def _load_zk_tls(value):
    from kafkatool.broker.security import zk as zk_security

    if value is None:
        zk_security.use_zk_security(None)
        return None
    try:
        zk_security.use_zk_security(zk_security.ZkSecurity.from_file(value))
    except zk_security.ZkSecurityError as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


def _options(callback) -> dict:
    """parameter name -> OptionInfo, for the options of a command callback."""
    import inspect

    from typer.models import OptionInfo

    return {
        name: p.default
        for name, p in inspect.signature(callback).parameters.items()
        if isinstance(p.default, OptionInfo)
    }


def _zookeeper_command(func: Callable, zk_param: str, zk_option, alternatives: list[str]) -> Callable:
    """``func`` with ``zk_option`` declaring --zookeeper, one more option, --zk-tls-config-file
    (consumed by its callback), and the one precedence rule for --zookeeper: an explicit option beats the environment, so a value
    that came only from $KAFKATOOL_ZOOKEEPER is dropped when one of ``alternatives`` (the
    parameters of ZOOKEEPER_ALTERNATIVES the command has, e.g. --bootstrap-server) is given.
    Both given explicitly reach the command, which accepts or refuses them as it always did."""
    import inspect

    sig = inspect.signature(func)
    option = typer.Option(
        None,
        "--zk-tls-config-file",
        metavar="FILE",
        help=ZK_TLS_CONFIG_HELP,
        callback=_load_zk_tls,
        show_default=False,
    )
    extra = [
        inspect.Parameter(
            "zk_tls_config_file", inspect.Parameter.KEYWORD_ONLY, default=option, annotation=str | None
        ),
        # typer passes the invocation's context: it knows where --zookeeper's value came from
        inspect.Parameter("zookeeper_ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context),
    ]

    @functools.wraps(func)
    def wrapper(*args, zookeeper_ctx: typer.Context, zk_tls_config_file=None, **kwargs):
        if (
            any(kwargs.get(a) is not None for a in alternatives)
            and zookeeper_ctx.get_parameter_source(zk_param).name == "ENVIRONMENT"
        ):
            kwargs[zk_param] = None
        return func(*args, **kwargs)

    params = [p.replace(default=zk_option) if p.name == zk_param else p for p in sig.parameters.values()]
    wrapper.__signature__ = sig.replace(parameters=[*params, *extra])
    wrapper._kafkatool_zookeeper = True
    return wrapper


def add_zookeeper_options(app: typer.Typer) -> None:
    """Every command that takes --zookeeper also takes --zk-tls-config-file, reads
    $KAFKATOOL_ZOOKEEPER with the one precedence rule (_zookeeper_command), and its help says so."""

    def walk(t: typer.Typer) -> None:
        for c in t.registered_commands:
            # a module-level sub-app (zk) is in every app built in the process: wrap it once
            if c.callback is None or getattr(c.callback, "_kafkatool_zookeeper", False):
                continue
            options = _options(c.callback)
            decls = {n: set(o.param_decls or ()) for n, o in options.items()}
            zk_param = next((n for n, d in decls.items() if "--zookeeper" in d), None)
            if zk_param is None:
                continue
            alternatives = [n for n, d in decls.items() if d & set(ZOOKEEPER_ALTERNATIVES)]
            flags = " or ".join(f for f in ZOOKEEPER_ALTERNATIVES if any(f in decls[n] for n in alternatives))
            rule = f", unless {flags} is given" if flags else ""
            # a copy: the declaration is the module's, shared by every app built in the process
            info = copy.copy(options[zk_param])
            info.help = f"{(info.help or '').rstrip()} Default: ${ZOOKEEPER_ENV}{rule}."
            c.callback = _zookeeper_command(c.callback, zk_param, info, alternatives)
        for g in t.registered_groups:
            walk(g.typer_instance)

    walk(app)
