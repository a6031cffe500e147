"""The ``kafkatool`` typer application.

Each command lives in ``kafkatool.commands.<module>`` and exposes
``register(app)``.  Command modules import heavy dependencies (pyspark,
kazoo, the broker) inside their functions so that ``kafkatool --help`` stays
fast.
"""

from __future__ import annotations

import importlib

import typer

from kafkatool import __version__
from kafkatool.commands.common import EXIT_CONTRACT, add_zk_tls_option, apply_exit_contract, name_metavars

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
    "groups",
    "leader_election",
    "health",
    "acls",
    "topics",
    "configs",
]

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


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"kafkatool {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
    ),
) -> None:
    """Operator CLI and on-disk forensics toolkit for Apache Kafka."""


for _name in COMMAND_MODULES:
    importlib.import_module(f"kafkatool.commands.{_name}").register(app)

add_zk_tls_option(app)
name_metavars(app)
apply_exit_contract(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
