"""The man pages under man/ are generated from the CLI's help and must not be stale."""

import subprocess
import sys

from conftest import REPO


def test_man_pages_are_current(tmp_path):
    out = subprocess.run(
        [sys.executable, str(REPO / "tools" / "gen_man.py"), "--check"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_generator_writes_one_page_per_command(tmp_path):
    subprocess.run([sys.executable, str(REPO / "tools" / "gen_man.py"), "--out", str(tmp_path)], check=True)
    names = {p.name for p in tmp_path.iterdir()}
    assert "kafkatool.1" in names
    top = (tmp_path / "kafkatool.1").read_text()
    assert top.startswith('.TH "KAFKATOOL" "1"')
    from kafkatool.cli import COMMAND_MODULES

    for mod in COMMAND_MODULES:
        page = f"kafkatool-{mod.replace('_', '-')}.1"
        assert page in names, page
        assert "kafkatool-" + mod.replace("_", "-") in top.replace("\\-", "-")


def test_cli_help_and_version():
    out = subprocess.run([sys.executable, "-m", "kafkatool", "--version"], capture_output=True, text=True)
    assert out.returncode == 0
    from kafkatool import __version__

    first, second = out.stdout.splitlines()
    assert first == f"kafkatool {__version__}"
    assert second.startswith("compiled hot path: ")
    out = subprocess.run([sys.executable, "-m", "kafkatool", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    from kafkatool.cli import COMMAND_MODULES

    for mod in COMMAND_MODULES:
        assert mod.replace("_", "-") in out.stdout


def test_every_command_renders_its_help():
    """--help of every command and subcommand works (no markup errors, no tracebacks)."""
    import typer.main
    from typer.testing import CliRunner

    from kafkatool.cli import app

    runner = CliRunner()
    root = typer.main.get_command(app)
    paths = []

    def walk(cmd, path):
        paths.append(path)
        if hasattr(cmd, "list_commands"):
            ctx = cmd.context_class(cmd, info_name="kafkatool")
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), [*path, name])

    walk(root, [])
    assert len(paths) > 5
    for path in paths:
        res = runner.invoke(app, [*path, "--help"])
        assert res.exit_code == 0, (path, res.output, res.exception)
        assert "Usage" in res.output
