"""Build the compiled hot path: kafkatool.accel.MODULES compiled by Cython into kafkatool/_accel/.

kafkatool.accel.NATIVE (Cython .pyx sources of C code, e.g. the append writer's GIL-free thread)
are built the same way, with the same manifest rule (their .pyx hash).

Each module's .py is compiled unchanged in Cython's pure-Python mode (Python semantics: no
annotation is read as a C type) into an extension module stored in ``kafkatool/_accel/`` under
a name holding the source's hash, where no import finds it on its own; ``manifest.json`` there
records, per module, the sha256 of the exact source compiled and the binary's name, and the
interpreter and Cython version of the build. ``kafkatool.accel.AccelFinder`` loads a binary only
while its module's .py still has that hash, so editing a module needs no rebuild to be correct,
only to be fast again.

Only what changed is rebuilt (a source whose hash differs from the manifest's, another
interpreter or Cython version, a binary missing); ``--force`` rebuilds everything. The sources
are copied before they are hashed and compiled, so the hash is that of the bytes compiled
even while someone edits the tree; the generated C and the objects are kept under ``build/``
only when a step fails. At the end every listed module is imported in a fresh interpreter and
must load compiled. Exit 0 built (or up to date), 1 a module failed to compile or load, 2
something the build needs is missing (Cython, a C compiler, the interpreter's headers).

    python tools/build_accel.py [--jobs N] [--force]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kafkatool import accel  # noqa: E402

# Cython's directives: Python's semantics, the source's behaviour kept.
DIRECTIVES = {
    "language_level": "3",
    # annotations are documentation here, never C types (an int annotation would make a C long
    # that overflows where Python's int does not, a class annotation a type check)
    "annotation_typing": "False",
    # functions stay introspectable and callable as Python's are (keyword arguments, binding
    # as methods, pickling by name)
    "binding": "True",
    "always_allow_keywords": "True",
    "emit_code_comments": "False",
}
# after the interpreter's own CFLAGS (-g -O3 here): no debug info and -O2 halve gcc's time
# (the whole build 320 -> 177 CPU-s, 55 -> 8 MB); -O3 was no faster at run time (the code is
# calls into the C API either way)
CFLAGS = ["-g0", "-O2"]


def fail(code: int, message: str) -> None:
    print(f"build_accel: {message}", file=sys.stderr)
    sys.exit(code)


def check_prerequisites() -> str:
    """Cython's version; exits 2 naming what is missing."""
    try:
        import Cython
    except ImportError:
        fail(2, "Cython is not installed (pip install -e '.[dev]' installs it)")
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        fail(2, f"no C compiler: {cc} not found (Debian: apt-get install gcc)")
    header = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not header.is_file():
        fail(
            2,
            f"the interpreter's headers are missing: {header} (Debian's python3: apt-get install python3-dev)",
        )
    return Cython.__version__


def read_manifest() -> dict:
    try:
        manifest = json.loads((Path(accel.ACCEL_DIR) / accel.MANIFEST_NAME).read_bytes())
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) and isinstance(manifest.get("modules"), dict) else {}


def binary_name(module: str, digest: str) -> str:
    return f"{module}.{digest[:16]}{accel.interpreter()['ext_suffix']}"


def cythonize(stage: Path, module: str) -> tuple[str, str | None]:
    rel = os.path.relpath(accel.source_path(module, str(stage / "kafkatool")), stage)
    cmd = [sys.executable, "-m", "cython", "--module-name", module, "-o", f"{module}.c", rel]
    cmd += ["-X", ",".join(f"{k}={v}" for k, v in DIRECTIVES.items())]
    p = subprocess.run(cmd, cwd=stage, capture_output=True, text=True)
    return module, None if p.returncode == 0 else (p.stdout + p.stderr).strip()


def compile_c(stage: Path, modules: list[str], jobs: int) -> dict[str, Path]:
    """The C of ``modules`` (in ``stage``) built into extension modules: module -> path."""
    from setuptools import Distribution, Extension

    exts = [Extension(m, [str(stage / f"{m}.c")], extra_compile_args=CFLAGS) for m in modules]
    dist = Distribution({"name": "kafkatool-accel", "ext_modules": exts, "script_name": "build_accel.py"})
    dist.verbose = 0
    cmd = dist.get_command_obj("build_ext")
    cmd.build_lib, cmd.build_temp = str(stage / "lib"), str(stage / "obj")
    cmd.parallel = jobs
    cmd.ensure_finalized()
    # the compiler's chatter (Cython's C draws -Warray-bounds false alarms) goes to a log,
    # shown when it fails
    log = stage / "compile.log"
    saved = os.dup(1), os.dup(2)
    sys.stdout.flush(), sys.stderr.flush()
    with open(log, "wb") as f:
        os.dup2(f.fileno(), 1), os.dup2(f.fileno(), 2)
        try:
            cmd.run()
        except Exception as exc:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
            tail = log.read_text(errors="replace").splitlines()[-40:]
            fail(1, f"the C compiler failed ({exc}; files kept in {stage}):\n" + "\n".join(tail))
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
            os.close(saved[0]), os.close(saved[1])
    return {m: Path(cmd.get_ext_fullpath(m)) for m in modules}


def verify_loads() -> None:
    """Every listed module imported in a fresh interpreter must run compiled."""
    code = (
        "import importlib, kafkatool.accel as a\n"
        "for m in a.MODULES: importlib.import_module(m)\n"
        "for m in a.NATIVE: importlib.import_module(m)\n"  # ImportError: not loadable
        "s = a.status(); print(s.line()); raise SystemExit(s.compiled != len(a.MODULES))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != accel.DISABLE_ENV}
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        fail(1, "a compiled module does not load: " + (p.stdout + p.stderr).strip())
    print(p.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), help="parallel compiles")
    ap.add_argument("--force", action="store_true", help="rebuild every module")
    a = ap.parse_args()
    t0 = time.monotonic()
    cython_version = check_prerequisites()
    out = Path(accel.ACCEL_DIR)
    old = read_manifest()
    build = {
        "cython": cython_version,
        **accel.interpreter(),
        "python": sys.version.split()[0],
        "directives": DIRECTIVES,
    }
    same_build = not a.force and all(old.get(k) == v for k, v in build.items())

    (ROOT / "build").mkdir(exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix="accel-", dir=ROOT / "build"))
    entries, todo = {}, []
    for module in (*accel.MODULES, *accel.NATIVE):
        data = Path(accel.source_path(module)).read_bytes()
        digest = accel.source_hash(data)
        entry = old.get("modules", {}).get(module) if same_build else None
        if entry and entry.get("sha256") == digest and (out / entry.get("file", "")).is_file():
            entries[module] = entry
            continue
        staged = Path(accel.source_path(module, str(stage / "kafkatool")))
        staged.parent.mkdir(parents=True, exist_ok=True)
        staged.write_bytes(data)
        entries[module] = {"sha256": digest, "file": binary_name(module, digest)}
        todo.append(module)

    if todo:
        print(f"build_accel: compiling {len(todo)} of {len(entries)} modules (Cython {cython_version})")
        with ThreadPoolExecutor(max(1, a.jobs)) as pool:
            errors = [(m, e) for m, e in pool.map(lambda m: cythonize(stage, m), todo) if e]
        if errors:
            report = "\n".join(f"{m}:\n{e}" for m, e in errors)
            fail(1, f"Cython failed (files kept in {stage}):\n{report}")
        built = compile_c(stage, todo, max(1, a.jobs))
        out.mkdir(exist_ok=True)
        for module in todo:
            dest = out / entries[module]["file"]
            tmp = dest.with_name(dest.name + ".tmp")
            shutil.copyfile(built[module], tmp)
            os.replace(tmp, dest)
    shutil.rmtree(stage)

    manifest = {**build, "modules": entries}
    tmp = out / (accel.MANIFEST_NAME + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, out / accel.MANIFEST_NAME)
    # binaries of older sources: nothing loads them any more (a running process keeps its own
    # mapping of a file unlinked under it)
    keep = {e["file"] for e in entries.values()} | {accel.MANIFEST_NAME}
    for f in out.iterdir():
        if f.name not in keep:
            f.unlink()
    verify_loads()
    print(
        f"build_accel: {len(todo)} compiled, {len(entries) - len(todo)} up to date, {time.monotonic() - t0:.1f} s"
    )


if __name__ == "__main__":
    main()
