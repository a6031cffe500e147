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


def test_serve_imports_no_other_command():
    probe = (
        "import sys\n"
        "sys.argv = ['kafkatool', 'serve', '--help']\n"
        "import kafkatool.cli\n"
        "try:\n"
        "    kafkatool.cli.main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "import json\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('kafkatool.commands.'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True, timeout=60
    )
    loaded = json.loads(out.stdout.splitlines()[-1])
    assert "Usage: " in out.stdout
    assert loaded == ["kafkatool.commands.common", "kafkatool.commands.serve"]
