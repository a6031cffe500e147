"""The ``kafkatool`` typer application.

Each command lives in ``kafkatool.commands.<module>`` and exposes
``register(app)``, which adds the one top-level command (or group) named
after the module (``dump_log`` -> ``dump-log``).  Command modules import heavy
dependencies (pyspark, kazoo, the broker) inside their functions so that
``kafkatool --help`` stays fast, and :func:`main` registers only the command
it is asked to run (``kafkatool serve ...`` imports no other command's
module); ``app``, the whole application (help, man pages, tests), is built
on first use.
"""

from __future__ import annotations

import importlib
import sys

import typer

from kafkatool import __version__
from kafkatool.commands.common import EXIT_CONTRACT, add_zookeeper_options, apply_exit_contract, name_metavars

# Order here is the order of ``kafkatool --help``.
COMMAND_MODULES = [
    "dump_log",
    "verify",
    "serve",
    "rebuild_index",
    "recover",
    "retention",
    "compact",
    "zk",
    "reassign",
    "fleet",
    "users",
    "delegation_tokens",
    "groups",
    "streams_reset",
    "transactions",
    "leader_election",
    "health",
    "acls",
    "topics",
    "consume",
    "produce",
    "configs",
    "log_dirs",
    "broker_api_versions",
    "metadata_shell",
    "perf",
]


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"kafkatool {__version__}")
        from kafkatool import accel

        typer.echo(accel.status().line())
        raise typer.Exit(0)


def _root(
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
    ),
) -> None:
    """Operator CLI and on-disk forensics toolkit for Apache Kafka."""


def build_app(modules: list[str] = COMMAND_MODULES) -> typer.Typer:
    """The typer application with the commands of ``modules`` (all by default)."""
    app = typer.Typer(
        name="kafkatool",
        help="Operator CLI and on-disk forensics toolkit for Apache Kafka.\n\n" + EXIT_CONTRACT,
        no_args_is_help=True,
        add_completion=False,
        context_settings={"help_option_names": ["-h", "--help"]},
        pretty_exceptions_enable=False,
        # Help texts are plain text: Kafka's own syntax (host:port[/chroot]) must not be read as rich markup.
        rich_markup_mode=None,
    )
    app.callback()(_root)
    for name in modules:
        importlib.import_module(f"kafkatool.commands.{name}").register(app)
    add_zookeeper_options(app)
    name_metavars(app)
    apply_exit_contract(app)
    return app


def __getattr__(name: str):
    if name == "app":
        globals()["app"] = app = build_app()
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def command_modules(argv: list[str]) -> list[str]:
    """The command modules a run with these arguments needs: the named command's alone, or all
    (the root's help, --version, a name that is no command: its error lists the commands)."""
    if argv:
        module = argv[0].replace("-", "_")
        if module in COMMAND_MODULES and argv[0] == module.replace("_", "-"):
            return [module]
    return COMMAND_MODULES


def main() -> None:
    build_app(command_modules(sys.argv[1:]))()


if __name__ == "__main__":
    main()
