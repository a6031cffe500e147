"""A run of one command registers (and imports) that command's module alone, with the same help."""

from __future__ import annotations

import json
import subprocess
import sys

import typer.main
from conftest import REPO
from typer.testing import CliRunner

from kafkatool.cli import COMMAND_MODULES, app, build_app, command_modules


def _top_level_names(a: typer.Typer) -> list[str]:
    ctx = typer.main.get_command(a).context_class(typer.main.get_command(a), info_name="kafkatool")
    return typer.main.get_command(a).list_commands(ctx)


def test_each_module_registers_the_command_named_after_it():
    # main() picks the module from the command's name: the rule it relies on
    for module in COMMAND_MODULES:
        assert _top_level_names(build_app([module])) == [module.replace("_", "-")], module
    assert sorted(_top_level_names(app)) == sorted(m.replace("_", "-") for m in COMMAND_MODULES)


def test_which_modules_a_run_needs():
    assert command_modules(["serve", "-o", "x=1"]) == ["serve"]
    assert command_modules(["dump-log", "--help"]) == ["dump_log"]
    assert command_modules(["zk", "ls", "/"]) == ["zk"]
    # the root's help, --version, and names that are no command get the whole application
    for argv in ([], ["--help"], ["--version"], ["dump_log"], ["nosuch"], ["-h", "serve"]):
        assert command_modules(argv) == COMMAND_MODULES, argv


def test_one_command_app_gives_the_same_help():
    runner = CliRunner()
    for module in COMMAND_MODULES:
        name = module.replace("_", "-")
        full = runner.invoke(app, [name, "--help"], prog_name="kafkatool")
        alone = runner.invoke(build_app([module]), [name, "--help"], prog_name="kafkatool")
        assert full.exit_code == alone.exit_code == 0, (name, full.output, alone.output)
        assert alone.output == full.output, name


def _modules_after(argv: list[str]) -> tuple[str, list[str]]:
    """Run ``kafkatool ARGV`` in a fresh interpreter: its output and the modules it loaded."""
    probe = (
        "import sys\n"
        f"sys.argv = ['kafkatool', *{argv!r}]\n"
        "import kafkatool.cli\n"
        "try:\n"
        "    kafkatool.cli.main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "import json\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True, timeout=60
    )
    return out.stdout, json.loads(out.stdout.splitlines()[-1])


def test_serve_imports_no_other_command():
    output, loaded = _modules_after(["serve", "--help"])
    assert "Usage: " in output
    assert [m for m in loaded if m.startswith("kafkatool.commands.")] == [
        "kafkatool.commands.common",
        "kafkatool.commands.serve",
    ]


def test_a_command_run_loads_no_pydantic(tmp_path):
    """typer 0.29 coerces every parameter through pydantic: about 0.15 s more on every command's
    start (pyproject.toml keeps typer below it).  A real run of a command with options, and a
    command's help, load no pydantic."""
    from segments import make_batches, write_segment

    segment = write_segment(tmp_path / "t-0", make_batches(3))
    for argv in (
        ["dump-log", "--deep-iteration", "--max-bytes", "1000000", str(segment)],
        ["serve", "--help"],
    ):
        output, loaded = _modules_after(argv)
        assert "Usage: " in output or "baseOffset: 0" in output, (argv, output)
        assert not [m for m in loaded if m.split(".")[0] in ("pydantic", "pydantic_core")], argv
