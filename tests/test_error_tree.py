"""One error tree (issue 12): every exception class the project defines derives from
kafkatool.errors.KafkatoolError (keeping a builtin base where callers catch one), and the
commands turn any of them into one line and exit 2, never a traceback."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
import typer

import kafkatool
from kafkatool.commands.common import EXIT_USAGE, handle_errors
from kafkatool.errors import KafkatoolError


def _modules():
    for info in pkgutil.walk_packages(kafkatool.__path__, "kafkatool."):
        if ".generated" in info.name or info.name.endswith("__main__"):
            continue
        yield importlib.import_module(info.name)


def project_exceptions() -> list[type]:
    out = {}
    for mod in _modules():
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ == mod.__name__ and issubclass(cls, BaseException):
                out[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return [out[k] for k in sorted(out)]


def test_every_project_exception_is_in_the_one_tree():
    found = project_exceptions()
    assert len(found) > 30  # the walk really sees the package
    assert [f"{c.__module__}.{c.__qualname__}" for c in found if not issubclass(c, KafkatoolError)] == []


def test_builtin_bases_are_kept_where_callers_catch_them():
    from kafkatool.assign.errors import AssignError
    from kafkatool.log.lock import LogDirLockedError
    from kafkatool.log.topic_settings import SettingsError

    assert issubclass(LogDirLockedError, OSError) and issubclass(AssignError, ValueError)
    assert issubclass(SettingsError, ValueError)


def test_commands_turn_the_root_into_one_line(capsys):
    from kafkatool.zk.client import ZkError

    @handle_errors
    def boom():
        raise ZkError("zookeeper said no")

    with pytest.raises(typer.Exit) as e:
        boom()
    assert e.value.exit_code == EXIT_USAGE
    assert capsys.readouterr().err == "kafkatool: error: zookeeper said no\n"
