"""Issue 12: usage lines and option rows show value names, never Python types.

Cases: ``<list[str]>`` (serve --override), ``FILE... <list[Path]>`` (arguments),
``<float range>`` (zk --timeout).  The class: every option and argument of every
command, walked through the real click command tree, and every command's rendered help.
"""

from __future__ import annotations

import re

import typer.main
from typer.testing import CliRunner

from kafkatool.cli import app

TYPE_MARK = re.compile(r"<(str|int|integer|float|bool|path|text|list\[[^>]*\]|[a-z]+ range|datetime)>")


def _commands():
    root = typer.main.get_command(app)
    out = []

    def walk(cmd, path):
        out.append((path, cmd))
        if hasattr(cmd, "list_commands"):
            ctx = cmd.context_class(cmd, info_name="kafkatool")
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), [*path, name])

    walk(root, [])
    return out


def test_every_option_and_argument_has_a_value_name():
    seen = 0
    for path, cmd in _commands():
        ctx = cmd.context_class(cmd, info_name=" ".join(["kafkatool", *path]))
        for p in cmd.params:
            record = p.get_help_record(ctx)
            if record is None:
                continue
            seen += 1
            assert "<" not in record[0], (path, record[0])
            if p.param_type_name == "argument" or not (p.is_flag or p.count):
                assert p.metavar, (path, p.name)
        usage = " ".join(cmd.collect_usage_pieces(ctx))
        assert "<" not in usage, (path, usage)
    assert seen > 100


def test_issue12_cases_in_rendered_help():
    runner = CliRunner()
    for path, _cmd in _commands():
        r = runner.invoke(app, [*path, "--help"])
        assert r.exit_code == 0, (path, r.output)
        assert not TYPE_MARK.search(r.output), (path, TYPE_MARK.search(r.output).group(0))
    serve = runner.invoke(app, ["serve", "--help"]).output
    assert "--override KEY=VALUE" in serve
    restore = runner.invoke(app, ["zk", "restore", "--help"]).output
    assert "--timeout SECONDS" in restore and re.search(r"^\s+FILE\s+A dump", restore, re.M)


def test_help_text_from_a_docstring_is_dedented():
    """A command's description comes from its docstring, whose continuation lines carry the
    code's indent: rendered, its first paragraph is the docstring's words with single spaces
    (the exit contract appended to the help once kept the indent: "equal to the     default")."""
    runner = CliRunner()
    checked = 0
    for path, cmd in _commands():
        doc = cmd.callback.__doc__ if cmd.callback is not None else None
        if not path or not doc or "\n" not in doc.split("\n\n")[0].strip():
            continue  # one-line first paragraphs cannot show it
        words = " ".join(doc.split("\n\n")[0].split())
        if not " ".join((cmd.help or "").split()).startswith(words):
            continue  # its help is given apart from the docstring
        out = runner.invoke(app, [*path, "--help"]).output
        described = out.split("\n\n")[1]  # after the usage line
        assert "".join(described.split()) == "".join(words.split()), path  # rich may wrap at a hyphen
        assert "   " not in described, (path, described)
        checked += 1
    assert checked >= 5
