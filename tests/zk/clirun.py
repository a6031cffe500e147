"""Run ``kafkatool zk ...`` in-process through typer's CliRunner."""

from __future__ import annotations

import json
from dataclasses import dataclass

import typer
from typer.testing import CliRunner

from kafkatool.commands import zk as zk_command

_app = typer.Typer()


@_app.callback()
def _root() -> None:
    pass


zk_command.register(_app)


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json_lines(self) -> list[dict]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


def run(*args: str, env: dict | None = None) -> Result:
    r = CliRunner(env=env).invoke(_app, ["zk", *args], catch_exceptions=False)
    return Result(r.exit_code, r.stdout, r.stderr)
