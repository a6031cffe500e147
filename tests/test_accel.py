"""The compiled hot path (kafkatool/accel.py, tools/build_accel.py): a listed module runs its
binary only while the binary was compiled from the current source by this kind of interpreter,
else its .py; KAFKATOOL_PURE_PYTHON=1 turns it off; compiled modules behave as their .py."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kafkatool
from kafkatool import accel

ROOT = Path(kafkatool.__file__).resolve().parent.parent
BUILT = (Path(accel.ACCEL_DIR) / accel.MANIFEST_NAME).is_file()
needs_build = pytest.mark.skipif(
    not BUILT, reason=f"the compiled hot path is not built: {accel.BUILD_COMMAND} (scripts/setup.sh runs it)"
)


def run_python(code: str, cwd: Path = ROOT, pure: bool = False) -> str:
    env = {k: v for k, v in os.environ.items() if k not in (accel.DISABLE_ENV, "PYTHONPATH")}
    if pure:
        env[accel.DISABLE_ENV] = "1"
    p = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout


IMPORT_ALL = """
import importlib, json, sys
import kafkatool.accel as a
for m in a.MODULES:
    importlib.import_module(m)
print(json.dumps({"origins": {m: sys.modules[m].__spec__.origin for m in a.MODULES},
                  "file": {m: sys.modules[m].__file__ for m in a.MODULES},
                  "line": a.status().line(),
                  "finders": [type(f).__name__ for f in sys.meta_path]}))
"""


def test_the_listed_modules_exist():
    for name in accel.MODULES:
        assert name.startswith("kafkatool.") and Path(accel.source_path(name)).is_file(), name
    assert len(set(accel.MODULES)) == len(accel.MODULES)


@needs_build
def test_a_build_of_the_current_sources_loads_every_module_compiled():
    got = json.loads(run_python(IMPORT_ALL))
    # every module from its binary outside the package's own folders (a stale build says so here)
    assert got["line"].startswith(
        f"compiled hot path: on ({len(accel.MODULES)} of {len(accel.MODULES)} modules"
    ), got["line"]
    for name, origin in got["origins"].items():
        assert Path(origin).parent == Path(accel.ACCEL_DIR), (name, origin)
        assert origin.endswith(accel.interpreter()["ext_suffix"]) and got["file"][name] == origin
    assert got["finders"][0] == "AccelFinder"


def test_pure_python_runs_every_module_from_its_py():
    got = json.loads(run_python(IMPORT_ALL, pure=True))
    assert got["line"] == (
        f"compiled hot path: off (0 of {len(accel.MODULES)} modules): disabled by {accel.DISABLE_ENV}=1"
    )
    for name, origin in got["origins"].items():
        assert origin == accel.source_path(name), (name, origin)
    assert "AccelFinder" not in got["finders"]


@needs_build
def test_an_edited_source_runs_its_py_and_the_rest_stays_compiled(tmp_path):
    # a copy of the package, the build's binaries and manifest shared, one listed module edited
    # after the build (the real tree is left alone)
    import shutil

    copy = tmp_path / "kafkatool"
    shutil.copytree(
        ROOT / "kafkatool",
        copy,
        ignore=shutil.ignore_patterns("__pycache__", accel.ACCEL_DIRNAME),
        symlinks=True,
    )
    (copy / accel.ACCEL_DIRNAME).symlink_to(accel.ACCEL_DIR)
    edited = "kafkatool.log.indexes"
    with open(accel.source_path(edited, str(copy)), "a") as f:
        f.write("# edited after the build\n")
    got = json.loads(run_python(IMPORT_ALL, cwd=tmp_path))
    assert got["origins"][edited] == accel.source_path(edited, str(copy))
    for name, origin in got["origins"].items():
        if name != edited:
            assert Path(origin).parent == copy / accel.ACCEL_DIRNAME, (name, origin)
    n = len(accel.MODULES)
    assert got["line"] == (
        f"compiled hot path: partial ({n - 1} of {n} modules, Cython {manifest()['cython']}); "
        f"pure Python: {edited} ({accel.STALE}); rebuild: {accel.BUILD_COMMAND}"
    )


def manifest() -> dict:
    return json.loads((Path(accel.ACCEL_DIR) / accel.MANIFEST_NAME).read_text())


# what a module's code shows of itself: the same compiled and interpreted
PROBE = """
import asyncio, dataclasses, importlib, inspect, json, pickle, sys, uuid
import kafkatool.accel as a
facts = {}
for m in a.MODULES:
    mod = importlib.import_module(m)
    for name, obj in sorted(vars(mod).items()):
        if getattr(obj, "__module__", None) != m:
            continue
        key = f"{m}.{name}"
        if isinstance(obj, type):
            facts[key] = {
                "qualname": obj.__qualname__,
                "dataclass": [f.name for f in dataclasses.fields(obj)] if dataclasses.is_dataclass(obj) else None,
                "slots": getattr(obj, "__slots__", None) and sorted(obj.__slots__),
                "pickled": pickle.loads(pickle.dumps(obj)) is obj,
                "methods": {
                    k: [asyncio.iscoroutinefunction(v), inspect.iscoroutinefunction(v),
                        inspect.isgeneratorfunction(v), str(inspect.signature(v))]
                    for k, v in sorted(vars(obj).items()) if inspect.isfunction(v) or type(v).__name__.startswith("cython")
                },
            }
        elif callable(obj):
            facts[key] = [asyncio.iscoroutinefunction(obj), inspect.iscoroutinefunction(obj),
                          inspect.isgeneratorfunction(obj), str(inspect.signature(obj)),
                          pickle.loads(pickle.dumps(obj)) is obj]
# instances of compiled classes across pickle (kafkatool.processes' channel pickles its messages)
from kafkatool.broker.metadata import TopicMeta
from kafkatool.formats.records import Record
from kafkatool.protocol.generated.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
t = TopicMeta("t", uuid.UUID(int=7), 3, {"cleanup.policy": "compact"})
r = Record(5, 1000, b"k", b"v", [("h", b"1")])
req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
    TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=b"x")])])
facts["instances"] = [repr(x) for x in (t, r, req)] + [pickle.loads(pickle.dumps(x)) == x for x in (t, r, req)]
print(json.dumps(facts, sort_keys=True, default=str))
"""


@needs_build
def test_compiled_modules_show_what_their_py_shows():
    compiled, interpreted = json.loads(run_python(PROBE)), json.loads(run_python(PROBE, pure=True))
    assert compiled.keys() == interpreted.keys()
    for key in compiled:
        assert compiled[key] == interpreted[key], key
    # the probe saw what it is about
    assert all(compiled["instances"][3:])
    assert any(v["dataclass"] for v in compiled.values() if isinstance(v, dict))
    assert any(m[0] for v in compiled.values() if isinstance(v, dict) for m in v["methods"].values())


# the finder's decisions on a manifest of its own (binaries never loaded, so any file will do)


def fake_build(tmp_path: Path, module: str = "kafkatool.log.indexes", **changes) -> accel.AccelFinder:
    acc = tmp_path / "acc"
    acc.mkdir(parents=True)
    digest = accel.source_hash(Path(accel.source_path(module)).read_bytes())
    entry = {"sha256": digest, "file": f"{module}.bin"}
    (acc / entry["file"]).write_bytes(b"not loaded")
    m = {"cython": "3.3.1", **accel.interpreter(), "modules": {module: entry}}
    for k, v in changes.items():
        if k == "sha256":
            entry["sha256"] = v
        else:
            m[k] = v
    (acc / accel.MANIFEST_NAME).write_text(json.dumps(m))
    return accel.AccelFinder(accel_dir=str(acc))


def test_the_finder_decides_by_the_sources_hash_and_the_interpreter(tmp_path):
    import kafkatool.log

    name = "kafkatool.log.indexes"
    f = fake_build(tmp_path / "a")
    spec = f.find_spec(name, kafkatool.log.__path__)
    assert f.decisions[name] == accel.COMPILED
    assert spec.origin == str(tmp_path / "a" / "acc" / f"{name}.bin")
    assert isinstance(spec.loader, accel._CompiledLoader)

    f = fake_build(tmp_path / "b", sha256="0" * 64)
    spec = f.find_spec(name, kafkatool.log.__path__)
    assert f.decisions[name] == accel.STALE
    assert spec.origin == accel.source_path(name)  # the .py, found as the import system finds it

    f = fake_build(tmp_path / "c", ext_suffix=".cpython-399-x86_64-linux-gnu.so")
    assert f.find_spec(name, kafkatool.log.__path__).origin == accel.source_path(name)
    assert f.decisions[name].startswith("built for another interpreter")

    f = fake_build(tmp_path / "d")
    (tmp_path / "d" / "acc" / f"{name}.bin").unlink()
    assert f.find_spec(name, kafkatool.log.__path__).origin == accel.source_path(name)
    assert f.decisions[name].startswith("binary missing")

    f = fake_build(tmp_path / "e")
    assert f.find_spec("kafkatool.log.segment", kafkatool.log.__path__).origin == accel.source_path(
        "kafkatool.log.segment"
    )
    assert f.decisions["kafkatool.log.segment"] == "not in the build"
    # not listed: not its business
    assert "kafkatool.log.cleaner" not in accel.MODULES
    assert f.find_spec("kafkatool.log.cleaner", kafkatool.log.__path__) is None

    (tmp_path / "f").mkdir()
    (tmp_path / "f" / accel.MANIFEST_NAME).write_text("{")
    f = accel.AccelFinder(accel_dir=str(tmp_path / "f"))
    assert f.find_spec(name, kafkatool.log.__path__).origin == accel.source_path(name)
    assert f.decisions[name].startswith("manifest unreadable: ")

    f = accel.AccelFinder(accel_dir=str(tmp_path / "none"))
    st = f.status()
    assert st.state == "off" and not st.degraded
    assert st.line() == (
        f"compiled hot path: off (0 of {len(accel.MODULES)} modules): not built ({accel.BUILD_COMMAND})"
    )


def test_a_binary_the_interpreter_cannot_load_leaves_the_module_to_its_py(tmp_path):
    pkg = tmp_path / "accelprobe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("VALUE = 42\n")
    acc = tmp_path / "acc"
    acc.mkdir()
    (acc / "accelprobe.mod.so").write_bytes(b"\x7fELF but not a shared object")
    entry = {"sha256": accel.source_hash((pkg / "mod.py").read_bytes()), "file": "accelprobe.mod.so"}
    m = {"cython": "3.3.1", **accel.interpreter(), "modules": {"accelprobe.mod": entry}}
    (acc / accel.MANIFEST_NAME).write_text(json.dumps(m))
    finder = accel.AccelFinder(accel_dir=str(acc), modules=["accelprobe.mod"], package_dir=str(pkg))
    sys.path.insert(0, str(tmp_path))
    sys.meta_path.insert(0, finder)
    try:
        import accelprobe.mod as mod

        assert mod.VALUE == 42
        assert mod.__file__ == str(pkg / "mod.py") and mod.__spec__.origin == str(pkg / "mod.py")
        assert finder.decisions["accelprobe.mod"].startswith("load failed: ")
        st = finder.status()
        assert st.state == "off" and st.degraded
        assert st.line().endswith(f"; rebuild: {accel.BUILD_COMMAND}")
    finally:
        sys.meta_path.remove(finder)
        sys.path.remove(str(tmp_path))
        for k in ("accelprobe", "accelprobe.mod"):
            sys.modules.pop(k, None)


def test_status_lines():
    n = len(accel.MODULES)
    on = accel.Status(dict.fromkeys(accel.MODULES, accel.COMPILED), "3.3.1")
    assert on.state == "on" and on.line() == f"compiled hot path: on ({n} of {n} modules, Cython 3.3.1)"
    part = accel.Status({**on.reasons, "kafkatool.log.log": accel.STALE}, "3.3.1")
    assert part.line() == (
        f"compiled hot path: partial ({n - 1} of {n} modules, Cython 3.3.1); pure Python: kafkatool.log.log "
        f"({accel.STALE}); rebuild: {accel.BUILD_COMMAND}"
    )
    stale = accel.Status(dict.fromkeys(accel.MODULES, accel.STALE), "3.3.1")
    assert stale.line() == (
        f"compiled hot path: off (0 of {n} modules): {accel.STALE}; rebuild: {accel.BUILD_COMMAND}"
    )


def test_serve_logs_the_hot_path_once(caplog, monkeypatch):
    from kafkatool.broker.log_lines import split_fields
    from kafkatool.commands.serve import _log_hot_path

    log = logging.getLogger("kafkatool.broker")
    # as in a process that imported kafkatool with KAFKATOOL_PURE_PYTHON=1
    monkeypatch.setattr(accel, "_finder", None)
    monkeypatch.setattr(accel, "_disabled_by", "1")
    with caplog.at_level(logging.INFO, logger="kafkatool.broker"):
        _log_hot_path(log)
    (rec,) = caplog.records
    assert rec.levelno == logging.INFO
    text, fields = split_fields(rec.getMessage())
    assert text == "compiled hot path"
    assert fields == {
        "state": "off",
        "compiled": 0,
        "modules": len(accel.MODULES),
        "reason": f"disabled by {accel.DISABLE_ENV}=1",
    }
    caplog.clear()
    monkeypatch.undo()
    with caplog.at_level(logging.INFO, logger="kafkatool.broker"):
        _log_hot_path(log)
    (rec,) = caplog.records
    text, fields = split_fields(rec.getMessage())
    st = accel.status()
    assert fields["state"] == st.state and fields["compiled"] == st.compiled
    assert rec.levelno == (logging.WARNING if st.degraded else logging.INFO)
