"""Checks of a CliRunner result shared by the command tests."""

from __future__ import annotations


def one_line_error(res, code: int = 2) -> str:
    """The command failed with ``code`` and said so in one line, no traceback; that line."""
    assert res.exit_code == code, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1, res.output
    return lines[0]


def run(*args):
    """``kafkatool ARGS`` in-process (CliRunner: stdout and stderr apart), every argument as text."""
    from typer.testing import CliRunner

    from kafkatool.cli import app

    return CliRunner().invoke(app, [str(a) for a in args])


def json_rows(res) -> list[dict]:
    """The objects a ``--json`` command printed on stdout, one a line."""
    import json

    return [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
