"""kafka-metadata-shell.sh's commands over a metadata image's node tree (Kafka 3.7's
shell/command and shell/glob packages).

:class:`Shell` runs one command line (a list of words) against the tree
formats/metadata_image.root_node builds: ``ls``, ``cat``, ``tree``, ``find`` (also outside the
interactive shell), ``cd``, ``pwd``, ``help``, ``man``, ``history``, ``exit`` (the shell only).
Paths are Kafka's: absolute or relative to the working directory, ``.`` and ``..`` resolved
first, each component a glob (``*``, ``?``, ``{a,b}``, ``\\`` escapes: GlobComponent) matched
against the sorted child names.  Output is Kafka's: ``ls`` in one column (in columns by the
terminal width in the shell), ``tree`` and ``cat`` as ShellNodePrinter (two spaces a level,
``name:`` for a directory), ``find`` the path as given and every node below it, and Kafka's
error lines (``cat: P: No such file or directory.``) on the same stream.  With ``json`` each
result is one JSON object per line instead: ``{"path", "value"}`` for cat, ``{"path", "node"}``
for tree (a directory as an object of its children), ``{"path", "directory", "children"}`` for
ls, ``{"path", "directory"}`` per node for find, ``{"command", "path", "error"}`` for a miss.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from kafkatool.formats.metadata_image import Node, Redaction, java_sorted

#: name -> (description, usage of its arguments, shell only)
COMMANDS: dict[str, tuple[str, str, bool]] = {
    "cat": ("Show the contents of metadata files.", "targets [targets ...]", False),
    "cd": ("Set the current working directory.", "[target]", True),
    "exit": ("Exit the metadata shell.", "", True),
    "find": ("Search for nodes in the directory hierarchy.", "[paths ...]", False),
    "help": ("Display this help message.", "", True),
    "history": ("Print command history.", "[numEntriesToShow]", True),
    "ls": ("List metadata nodes.", "[targets ...]", False),
    "man": ("Show the help text for a specific command.", "cmd", True),
    "pwd": ("Print the current working directory.", "", True),
    "tree": ("Show the contents of metadata nodes in a tree structure.", "targets [targets ...]", False),
}
_ARGUMENT_HELP = {
    "cat": ("targets", "The metadata files to display."),
    "cd": ("target", "The directory to change to."),
    "find": ("paths", "The paths to start at."),
    "history": ("numEntriesToShow", "The number of entries to show."),
    "ls": ("targets", "The metadata node paths to list."),
    "man": ("cmd", "The command to get help text for."),
    "tree": ("targets", "The metadata nodes to display."),
}
#: (fewest, most) arguments of each command (None: any number)
_NARGS = {
    "cat": (1, None),
    "cd": (0, 1),
    "exit": (0, 0),
    "find": (0, None),
    "help": (0, 0),
    "history": (0, 1),
    "ls": (0, None),
    "man": (1, 1),
    "pwd": (0, 0),
    "tree": (1, None),
}


# ----------------------------------------------------------------------------- paths and globs
def split_path(path: str) -> list[str]:
    """CommandUtils.splitPath."""
    return [c for c in path.split("/") if c]


def strip_dots(components: list[str]) -> list[str]:
    """CommandUtils.stripDotPathComponents."""
    out: list[str] = []
    for c in components:
        if c == "..":
            if out:
                out.pop()
        elif c != ".":
            out.append(c)
    return out


_REGEX_SPECIAL = set("$()+.[]^{|")
_GLOB_SPECIAL = set("*?\\{}")


def glob_regex(glob: str) -> str | None:
    """GlobComponent.toRegularExpression: None for a literal (or a glob Kafka cannot read)."""
    out = ["^"]
    literal = True
    group = False
    i = 0
    while i < len(glob):
        c = glob[i]
        i += 1
        if c == "?":
            literal = False
            out.append(".")
        elif c == "*":
            literal = False
            out.append(".*")
        elif c == "\\":
            if i == len(glob):
                return None  # a trailing backslash: Pattern.compile throws, Kafka takes it literally
            else:
                nxt = glob[i]
                i += 1
                out.append("\\" + nxt if nxt in _GLOB_SPECIAL or nxt in _REGEX_SPECIAL else nxt)
        elif c == "{":
            if group:
                return None  # "Can't nest glob groups.": Kafka takes the component literally
            literal = False
            out.append("(?:(?:")
            group = True
        elif c == ",":
            if group:
                literal = False
                out.append(")|(?:")
            else:
                out.append(",")
        elif c == "}":
            if group:
                literal = False
                out.append("))")
                group = False
            else:
                out.append("\\}")
        else:
            out.append("\\" + c if c in _REGEX_SPECIAL else c)
    if group or literal:
        return None
    out.append("$")
    return "".join(out)


@dataclass
class Match:
    path: list[str]
    node: Node

    @property
    def last(self) -> str:
        return self.path[-1] if self.path else "/"

    @property
    def absolute(self) -> str:
        return "/" + "/".join(self.path)


def _glob(node: Node, components: list[str], index: int, path: list[str], out: list[Match]) -> bool:
    """GlobVisitor.accept."""
    if index >= len(components):
        out.append(Match(path, node))
        return True
    component = components[index]
    regex = glob_regex(component)
    if not node.directory:
        return False
    if regex is None:
        child = node.child(component)
        return child is not None and _glob(child, components, index + 1, [*path, component], out)
    pattern = re.compile(regex, re.DOTALL)
    matched = False
    for name in java_sorted(node.names()):
        if pattern.match(name):
            child = node.child(name)
            if child is not None and _glob(child, components, index + 1, [*path, name], out):
                matched = True
    return matched


# ----------------------------------------------------------------------------- ls's columns
def _column_schema(width: int | None, entries: list[str]) -> tuple[list[int], int]:
    """LsCommandHandler.calculateColumnSchema: (column widths, entries per column)."""
    if width is None or width // 4 <= 1:
        return [0], len(entries)
    schemas = []
    for columns in range(1, width // 4 + 1):
        per = (len(entries) + columns - 1) // columns
        widths = [0] * columns
        for i, entry in enumerate(entries):
            c = i // per if per else 0
            widths[c] = max(widths[c], len(entry) + 2)
        schemas.append((widths, per))
    for widths, per in reversed(schemas[1:]):
        if widths[-1] != 0 and sum(widths) <= width:
            return widths, per
    return schemas[0]


def ls_lines(entries: list[str], width: int | None) -> list[str]:
    """LsCommandHandler.printEntries, without the intro."""
    if not entries:
        return []
    widths, per = _column_schema(width, entries)
    columns = len(widths)
    lines = (len(entries) + columns - 1) // columns
    out = []
    for line in range(lines):
        text = ""
        for column in range(columns):
            i = line + column * per
            if i < len(entries):
                entry = entries[i]
                text += entry
                if column < columns - 1:
                    text += " " * (widths[column] - len(entry))
        out.append(text)
    return out


# ----------------------------------------------------------------------------- the shell
@dataclass
class Shell:
    root: Node
    redaction: Redaction
    out: TextIO
    json_mode: bool = False
    #: the interactive shell's: cd, pwd, help, man, history and exit, and ls in columns
    interactive: bool = False
    #: the terminal's width for ls's columns (None: one column)
    width: Callable[[], int | None] = lambda: None
    #: where parse errors go (None: ``out``, as Kafka's shell writes them)
    err: TextIO | None = None
    cwd: str = "/"
    history: list[str] = field(default_factory=list)
    #: a target of the last command was not found (the one-command run's exit status)
    missed: bool = False
    #: the last command was refused (unknown command or bad arguments)
    refused: bool = False
    #: ``exit`` ran
    exiting: bool = False

    # ------------------------------------------------------------------ output
    def _print(self, text: str) -> None:
        self.out.write(text + "\n")

    def _json(self, obj: dict) -> None:
        self.out.write(json.dumps(obj, ensure_ascii=False) + "\n")

    def _miss(self, command: str, target: str, message: str) -> None:
        self.missed = True
        if self.json_mode:
            self._json({"command": command, "path": target, "error": message.rstrip(".")})
        else:
            self._print(f"{command}: {target}: {message}")

    def _error(self, message: str) -> None:
        """ErroneousCommandHandler: the parse error, on the command's stream."""
        self.refused = True
        (self.err or self.out).write(message + "\n")

    def resolve(self, target: str) -> list[Match]:
        full = target if target.startswith("/") else self.cwd + "/" + target
        out: list[Match] = []
        _glob(self.root, strip_dots(split_path(full)), 0, [], out)
        return out

    # ------------------------------------------------------------------ parsing
    def run(self, words: list[str]) -> bool:
        """Commands.parseCommand + the handler's run; True after ``exit``."""
        self.missed = self.refused = False
        words = list(words)
        while words and not words[-1]:
            words.pop()
        if not words:
            return False
        available = [n for n, (_, _, shell_only) in COMMANDS.items() if self.interactive or not shell_only]
        name, args = words[0], words[1:]
        if name not in available:
            prefixed = [n for n in available if n.startswith(name)]
            if len(prefixed) == 1:
                self._error(f"invalid choice: '{name}': did you mean '{prefixed[0]}'?")
            else:
                choices = ", ".join(f"'{n}'" for n in available)
                self._error(f"argument command: invalid choice: '{name}' (choose from {choices})")
            return False
        if "-h" in args or "--help" in args:
            self._man(name)
            return False
        fewest, most = _NARGS[name]
        if len(args) < fewest:
            self._error(f"{name}: too few arguments")
            return False
        if most is not None and len(args) > most:
            extra = " ".join(args[most:])
            self._error(f"{name}: unrecognized arguments: '{extra}'")
            return False
        getattr(self, "_" + name)(args)
        return self.exiting

    # ------------------------------------------------------------------ commands
    def _ls(self, targets: list[str]) -> None:
        files: list[str] = []
        dirs: list[tuple[str, list[str]]] = []
        for target in [t for t in targets if t] or ["."]:
            matches = self.resolve(target)
            if not matches:
                self._miss("ls", target, "no such file or directory.")
            for m in matches:
                if self.json_mode:
                    obj = {"path": m.absolute, "directory": m.node.directory}
                    if m.node.directory:
                        obj["children"] = java_sorted(m.node.names())
                    self._json(obj)
                elif m.node.directory:
                    dirs.append((m.last, java_sorted(m.node.names())))
                else:
                    files.append(m.last)
        if self.json_mode:
            return
        width = self.width() if self.interactive else None
        for line in ls_lines(files, width):
            self._print(line)
        need_intro = bool(files) or len(dirs) > 1
        first = not files
        for name, children in dirs:
            # printEntries prints the intro only with entries, but the first intro is used up
            intro = need_intro and children
            if intro and not first:
                self._print("")
            if intro:
                self._print(name + ":")
            first = first and not need_intro
            for line in ls_lines(children, width):
                self._print(line)

    def _cat(self, targets: list[str]) -> None:
        for target in targets:
            matches = self.resolve(target)
            if not matches:
                self._miss("cat", target, "No such file or directory.")
            for m in matches:
                if m.node.directory:
                    if self.json_mode:
                        self._json({"command": "cat", "path": m.absolute, "error": "Is a directory"})
                    else:
                        self._print(f"cat: {target}: Is a directory")
                elif self.json_mode:
                    self._json({"path": m.absolute, "value": m.node.to_json(self.redaction)})
                else:
                    self._tree_lines(m.node, 0)

    def _tree(self, targets: list[str]) -> None:
        for target in targets:
            matches = self.resolve(target)
            if not matches:
                self._miss("tree", target, "No such file or directory.")
            for m in matches:
                if self.json_mode:
                    self._json({"path": m.absolute, "node": m.node.to_json(self.redaction)})
                else:
                    self._tree_lines(m.node, 0)

    def _tree_lines(self, node: Node, level: int) -> None:
        """MetadataNode.print through ShellNodePrinter."""
        indent = "  " * level
        if not node.directory:
            for text in node.lines(self.redaction):
                self._print(indent + text)
            return
        for name in java_sorted(node.names()):
            child = node.child(name)
            if child is None:
                continue
            self._print(f"{indent}{name}:")
            self._tree_lines(child, level + 1)

    def _find(self, paths: list[str]) -> None:
        for path in [p for p in paths if p] or ["."]:
            matches = self.resolve(path)
            if not matches:
                self._miss("find", path, "no such file or directory.")
            for m in matches:
                self._find_from(path, m.absolute, m.node)

    def _find_from(self, shown: str, absolute: str, node: Node) -> None:
        if self.json_mode:
            self._json({"path": absolute, "directory": node.directory})
        else:
            self._print(shown)
        if not node.directory:
            return
        for name in java_sorted(node.names()):
            child = node.child(name)
            if child is None:
                continue
            self._find_from(
                shown + name if shown == "/" else f"{shown}/{name}",
                absolute + name if absolute == "/" else f"{absolute}/{name}",
                child,
            )

    def _cd(self, args: list[str]) -> None:
        target = args[0] if args else "/"
        matches = self.resolve(target)
        if not matches:
            self._miss("cd", target, "no such directory.")
        for m in matches:
            if not m.node.directory:
                self._miss("cd", target, "not a directory.")
            else:
                self.cwd = m.absolute

    def _pwd(self, _args: list[str]) -> None:
        if self.json_mode:
            self._json({"path": self.cwd})
        else:
            self._print(self.cwd)

    def _exit(self, _args: list[str]) -> None:
        self.exiting = True

    def _help(self, _args: list[str]) -> None:
        names = ",".join(COMMANDS)
        self._print("Welcome to the Apache Kafka metadata shell.")
        self._print("")
        self._print(f"usage:  [-h] {{{names}}} ...")
        self._print("")
        self._print("positional arguments:")
        self._print(f"  {{{names}}}")
        for name, (description, _, _) in COMMANDS.items():
            self._print(f"    {name:<21}{description}")
        self._print("")
        self._print("named arguments:")
        self._print("  -h, --help             show this help message and exit")

    def _man(self, name: str | list[str]) -> None:
        name = name[0] if isinstance(name, list) else name
        entry = COMMANDS.get(name)
        if entry is None:
            self._print(f"man: unknown command {name}. Type help to get a list of commands.")
            return
        description, usage, _ = entry
        self._print(f"{name}: {description}")
        self._print("")
        self._print(f"usage: {name} [-h]" + (f" {usage}" if usage else ""))
        if name in _ARGUMENT_HELP:
            arg, text = _ARGUMENT_HELP[name]
            self._print("")
            self._print("positional arguments:")
            self._print(f"  {arg:<22} {text}")
        self._print("")
        self._print("named arguments:")
        self._print("  -h, --help             show this help message and exit")

    def _history(self, args: list[str]) -> None:
        count = len(self.history)
        if args:
            try:
                count = int(args[0])
            except ValueError:
                self._error(f"argument numEntriesToShow: could not convert '{args[0]}' to Integer")
                return
        count = max(0, min(count, len(self.history)))
        for i in range(len(self.history) - count, len(self.history)):
            self._print(f"{i:5d}  {self.history[i]}")

    # ------------------------------------------------------------------ completion
    def complete_path(self, prefix: str) -> list[str]:
        """CommandUtils.completePath's candidates: child names under the prefix's directory,
        a directory's with a trailing ``/``."""
        full = prefix if prefix.startswith("/") else self.cwd + "/" + prefix
        components = strip_dots(split_path(full))
        dirs = len(components) if prefix.endswith("/") or not prefix else len(components) - 1
        node = self.root
        for c in components[: max(dirs, 0)]:
            node = node.child(c) if node.directory else None
            if node is None or not node.directory:
                return []
        last = components[dirs] if 0 <= dirs < len(components) else ""
        head = prefix[: prefix.rfind("/") + 1]
        out = []
        for name in java_sorted(node.names()):
            if name.startswith(last):
                child = node.child(name)
                out.append(head + name + ("/" if child is not None and child.directory else ""))
        return out
