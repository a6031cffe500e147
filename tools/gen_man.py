#!/usr/bin/env python3
"""Generate man pages for kafkatool from the CLI's own help.

    python tools/gen_man.py            # writes man/*.1
    python tools/gen_man.py --check    # exit 1 if man/ is stale

One page for the program (kafkatool.1) and one per command and subcommand
(kafkatool-dump-log.1, kafkatool-zk-ls.1, ...).  Output is deterministic (no
dates) so that a test can compare it with the committed pages.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import typer.main

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kafkatool import __version__  # noqa: E402
from kafkatool.cli import app  # noqa: E402

SECTION = "1"
MANUAL = "kafkatool manual"


def _esc(text: str) -> str:
    """Escape text for roff: backslashes, leading dots/quotes, hyphens in options."""
    text = text.replace("\\", "\\e")
    lines = []
    for line in text.splitlines():
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def _opt(text: str) -> str:
    return _esc(text).replace("-", "\\-")


def _paragraphs(help_text: str) -> list[str]:
    help_text = (help_text or "").strip()
    paras = [p.strip() for p in help_text.split("\n\n") if p.strip()]
    return [" ".join(line.strip() for line in p.splitlines()) if not p.startswith("\b") else p for p in paras]


# typer vendors its own copy of click, so commands and parameters are recognised
# by what they are (param_type_name, list_commands), not by click's classes.


def _ctx(cmd, name: str):
    return cmd.context_class(cmd, info_name=name)


def _param_lines(param) -> tuple[str, str]:
    if param.param_type_name == "argument":
        name = param.metavar or (param.name or "").upper()
        if param.nargs == -1 and not name.endswith("..."):
            name += "..."
        return f"\\fI{_opt(name)}\\fR", " ".join((param.help or "").split())
    names = ", ".join(f"\\fB{_opt(n)}\\fR" for n in [*param.opts, *param.secondary_opts])
    if not getattr(param, "is_flag", False) and not getattr(param, "count", False):
        metavar = param.metavar or param.bare_type().upper()
        names += f" \\fI{_opt(metavar)}\\fR"
    help_text = " ".join((param.help or "").split())
    extras = []
    if param.envvar:
        envs = param.envvar if isinstance(param.envvar, list | tuple) else [param.envvar]
        extras.append("env: " + ", ".join(envs))
    if param.show_default and param.default not in (None, False, (), []) and not callable(param.default):
        extras.append(f"default: {param.default}")
    if extras:
        help_text = f"{help_text} [{'; '.join(extras)}]".strip()
    return names, help_text


def _usage(cmd, path: list[str]) -> str:
    ctx = _ctx(cmd, " ".join(path))
    pieces = cmd.collect_usage_pieces(ctx)
    return " ".join(path) + (" " + " ".join(pieces) if pieces else "")


def render(cmd, path: list[str], subcommands: list[tuple[str, str]]) -> str:
    title = "-".join(path).upper()
    name = "-".join(path)
    short = (cmd.get_short_help_str(limit=200) or "").strip()
    out = [
        f'.TH "{title}" "{SECTION}" "" "kafkatool {__version__}" "{MANUAL}"',
        ".SH NAME",
        f"{_opt(name)} \\- {_esc(short)}",
        ".SH SYNOPSIS",
        f".B {_opt(_usage(cmd, path))}",
    ]
    paras = _paragraphs(cmd.help or "")
    if paras:
        out.append(".SH DESCRIPTION")
        for i, p in enumerate(paras):
            if i:
                out.append(".PP")
            if p.startswith("\b"):
                out.append(".nf")
                out.append(_esc(p.lstrip("\b").strip("\n")))
                out.append(".fi")
            else:
                out.append(_esc(p))
    args = [p for p in cmd.params if p.param_type_name == "argument"]
    opts = [p for p in cmd.params if p.param_type_name == "option" and not p.hidden]
    if args:
        out.append(".SH ARGUMENTS")
        for p in args:
            names, text = _param_lines(p)
            out += [".TP", names]
            if text:
                out.append(_esc(text))
    if opts:
        out.append(".SH OPTIONS")
        for p in opts:
            names, text = _param_lines(p)
            out += [".TP", names, _esc(text) if text else ""]
    if subcommands:
        out.append(".SH COMMANDS")
        for sub, help_text in subcommands:
            out += [".TP", f"\\fB{_opt(sub)}\\fR", _esc(help_text)]
    out.append(".SH EXIT STATUS")
    out.append("0 success; 1 findings (problems found in the data examined); 2 usage or input error.")
    see = ["kafkatool(1)"] if len(path) > 1 else []
    see += (
        [f"{'-'.join(path)}-{s}(1)" for s, _ in subcommands]
        if len(path) > 1
        else [f"kafkatool-{s}(1)" for s, _ in subcommands]
    )
    if see:
        out.append(".SH SEE ALSO")
        out.append(_opt(", ".join(see)))
    return "\n".join(line for line in out if line is not None) + "\n"


def pages() -> dict[str, str]:
    root = typer.main.get_command(app)
    result: dict[str, str] = {}

    def walk(cmd, path: list[str]) -> None:
        subs: list[tuple[str, str]] = []
        if hasattr(cmd, "list_commands"):
            ctx = _ctx(cmd, path[-1])
            for sub_name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, sub_name)
                if sub is None or sub.hidden:
                    continue
                subs.append((sub_name, sub.get_short_help_str(limit=200)))
                walk(sub, [*path, sub_name])
        result["-".join(path) + f".{SECTION}"] = render(cmd, path, subs)

    walk(root, ["kafkatool"])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the pages in --out are stale")
    parser.add_argument("--out", type=Path, default=REPO / "man")
    args = parser.parse_args(argv)
    wanted = pages()
    if args.check:
        existing = {p.name: p.read_text() for p in args.out.glob(f"*.{SECTION}")}
        stale = sorted(n for n in wanted if existing.get(n) != wanted[n])
        extra = sorted(set(existing) - set(wanted))
        for n in stale:
            print(f"stale or missing: {args.out / n}")
        for n in extra:
            print(f"no longer generated: {args.out / n}")
        if stale or extra:
            print("run: python tools/gen_man.py")
            return 1
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob(f"*.{SECTION}"):
        if old.name not in wanted:
            old.unlink()
    for name, text in wanted.items():
        (args.out / name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
