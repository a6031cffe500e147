"""The optional compiled hot path (issue 16): a few hot modules compiled by Cython, the .py as truth.

``tools/build_accel.py`` compiles the modules of :data:`MODULES` (the one list), unchanged, with
Cython in pure-Python mode into ``kafkatool/_accel/`` (never on the import path's own lookup)
and writes ``manifest.json`` there: per module, the sha256 of the exact source it compiled and
the binary's file name, plus the interpreter (cache tag, extension suffix) and Cython's
version. Importing ``kafkatool`` puts :class:`AccelFinder` first on ``sys.meta_path`` when a
manifest exists; for a listed module it loads the binary only if the manifest's hash is the
current .py's and the interpreter is the build's. Otherwise (and for a binary the interpreter
cannot load) the .py is imported as usual, so an edited source is never shadowed by an old
binary. ``KAFKATOOL_PURE_PYTHON=1`` turns it off (profiling, debugging). :func:`status` says
which code runs (serve's start-up line, ``kafkatool --version``, the benches).

Import cost: ``import kafkatool`` checks whether the manifest exists (one stat); the manifest
is read and a source hashed only when a listed module is first imported.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader, ModuleSpec, PathFinder

# The hot modules compiled, in one place (the build, the finder and the status read it).
# Issue 16's 16 KiB produce path (request framing and decoding, the handler, the log's append
# and its validation), the network layer, and the fetch path.
MODULES = (
    "kafkatool.formats.schema",
    "kafkatool.formats.records",
    "kafkatool.protocol.framing",
    "kafkatool.protocol.apis",
    "kafkatool.protocol.generated.produce_request",
    "kafkatool.protocol.generated.produce_response",
    "kafkatool.protocol.generated.fetch_request",
    "kafkatool.protocol.generated.fetch_response",
    "kafkatool.log.log",
    "kafkatool.log.segment",
    "kafkatool.log.indexes",
    "kafkatool.log.validator",
    "kafkatool.broker.network",
    "kafkatool.broker.server",
    "kafkatool.broker.router",
    "kafkatool.broker.metadata",
    "kafkatool.broker.handlers.produce",
    "kafkatool.broker.handlers.fetch",
    "kafkatool.broker.cluster.fetcher",
    "kafkatool.broker.cluster.replica",
    # what the produce path above still called as interpreted Python (cProfile of Router.dispatch
    # with the rest compiled: ~14 calls a request, 23% of its instructions in the interpreter)
    "kafkatool.formats.index",
    "kafkatool.log.producer_state",
    "kafkatool.log.leader_epoch",
    "kafkatool.log.manager",
    "kafkatool.broker.txn.verification",
    "kafkatool.broker.metrics",
)

# Native modules: Cython sources (.pyx) of C code that has no pure-Python twin module; the
# caller imports one and falls back to its own Python code on ImportError (the finder raises
# it for a native module whose binary is missing, stale or unloadable).  The append writer's
# thread (log/append_writer.py) runs without the GIL.
NATIVE = ("kafkatool.log._append_writer",)

DISABLE_ENV = "KAFKATOOL_PURE_PYTHON"
ACCEL_DIRNAME = "_accel"
MANIFEST_NAME = "manifest.json"
BUILD_COMMAND = "python tools/build_accel.py"
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
ACCEL_DIR = os.path.join(PACKAGE_DIR, ACCEL_DIRNAME)

COMPILED = "compiled"
STALE = "stale: source changed since the build"


def disabled() -> bool:
    """``KAFKATOOL_PURE_PYTHON`` set to anything but empty or 0."""
    return os.environ.get(DISABLE_ENV, "") not in ("", "0")


def interpreter() -> dict[str, str]:
    """What a binary must have been built for: the interpreter's cache tag and extension suffix."""
    return {"cache_tag": sys.implementation.cache_tag, "ext_suffix": EXTENSION_SUFFIXES[0]}


def source_hash(data: bytes) -> str:
    """The one hash of a module's source (the manifest's and the finder's)."""
    import hashlib

    return hashlib.sha256(data).hexdigest()


def source_path(name: str, package_dir: str = PACKAGE_DIR) -> str:
    """The .py file of listed module ``name`` under the package directory (the .pyx of a
    native one)."""
    return os.path.join(package_dir, *name.split(".")[1:]) + (".pyx" if name in NATIVE else ".py")


class AccelFinder:
    """A ``sys.meta_path`` finder loading a listed module's binary from ``accel_dir`` when the
    manifest says it was compiled from the current source by this interpreter's kind."""

    def __init__(
        self, accel_dir: str = ACCEL_DIR, modules=MODULES, package_dir: str = PACKAGE_DIR, native=NATIVE
    ):
        self.accel_dir = accel_dir
        self.package_dir = package_dir
        self.modules = frozenset(modules)
        self.native = frozenset(native)
        self.decisions: dict[str, str] = {}  # module -> COMPILED or why its .py runs
        self._manifest: dict | None = None
        self._manifest_error: str | None = None

    def manifest(self) -> tuple[dict | None, str | None]:
        """The manifest (read once), or None and why not."""
        if self._manifest is None and self._manifest_error is None:
            import json

            path = os.path.join(self.accel_dir, MANIFEST_NAME)
            try:
                with open(path, "rb") as f:
                    manifest = json.loads(f.read())
                if not isinstance(manifest, dict) or not isinstance(manifest.get("modules"), dict):
                    raise ValueError("not a manifest object")
                self._manifest = manifest
            except FileNotFoundError:
                self._manifest_error = f"not built ({BUILD_COMMAND})"
            except (OSError, ValueError) as exc:
                self._manifest_error = f"manifest unreadable: {path}: {exc}"
        return self._manifest, self._manifest_error

    def decide(self, name: str, py_path: str) -> tuple[str, str | None]:
        """(COMPILED or the reason the .py runs, the binary's path) for listed module ``name``."""
        manifest, error = self.manifest()
        if manifest is None:
            return error, None
        want = interpreter()
        have = {k: manifest.get(k) for k in want}
        if have != want:
            return f"built for another interpreter ({have['cache_tag']}, {have['ext_suffix']})", None
        entry = manifest["modules"].get(name)
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            return "not in the build", None
        binary = os.path.join(self.accel_dir, os.path.basename(entry["file"]))
        if not os.path.isfile(binary):
            return f"binary missing: {binary}", None
        try:
            with open(py_path, "rb") as f:
                current = source_hash(f.read())
        except OSError as exc:
            return f"source unreadable: {exc}", None
        if current != entry.get("sha256"):
            return STALE, None
        return COMPILED, binary

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.native:
            return self._native_spec(fullname)
        if fullname not in self.modules:
            return None
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or not (spec.origin or "").endswith(".py"):
            return spec
        reason, binary = self.decide(fullname, spec.origin)
        self.decisions[fullname] = reason
        if binary is None:
            return spec
        compiled = ModuleSpec(fullname, _CompiledLoader(fullname, binary, spec, self), origin=binary)
        compiled.has_location = True  # __file__ is the binary's path
        return compiled

    def _native_spec(self, fullname: str):
        """A native module's binary spec; none usable: ImportError (its caller's fallback)."""
        reason, binary = self.decide(fullname, source_path(fullname, self.package_dir))
        self.decisions[fullname] = reason
        if binary is None:
            raise ImportError(f"{fullname}: {reason}", name=fullname)
        spec = ModuleSpec(fullname, _CompiledLoader(fullname, binary, None, self), origin=binary)
        spec.has_location = True
        return spec

    def status(self) -> Status:
        """Which listed modules run compiled, and why the others do not: the decision taken at
        their import, or the one their import would take now."""
        reasons = {}
        for name in sorted(self.modules):
            reason = self.decisions.get(name)
            if reason is None:
                reason, _binary = self.decide(name, source_path(name, self.package_dir))
            reasons[name] = reason
        manifest, _error = self.manifest()
        return Status(reasons, (manifest or {}).get("cython"))


class _CompiledLoader(ExtensionFileLoader):
    """The binary's loader; a binary the interpreter cannot load (the dynamic loader's
    ImportError) leaves the module to its .py, with the reason recorded."""

    def __init__(self, name: str, path: str, source_spec: ModuleSpec, finder: AccelFinder):
        super().__init__(name, path)
        self._source_spec = source_spec
        self._finder = finder

    def create_module(self, spec):
        try:
            return super().create_module(spec)
        except ImportError as exc:
            self._finder.decisions[spec.name] = f"load failed: {exc}"
            if self._source_spec is None:
                raise  # a native module: its caller falls back
            # importlib reads the spec's loader again after this returns: the .py's loader runs
            # the module, and its attributes (__file__, __cached__) are the .py's
            source = self._source_spec
            spec.loader, spec.origin, spec.cached = source.loader, source.origin, source.cached
            return source.loader.create_module(spec)


class Status:
    """Which listed modules run compiled (``reasons[name] == COMPILED``) and why others do not."""

    def __init__(self, reasons: dict[str, str], cython: str | None):
        self.reasons = reasons
        self.cython = cython

    @property
    def compiled(self) -> int:
        return sum(1 for r in self.reasons.values() if r == COMPILED)

    @property
    def state(self) -> str:
        n = self.compiled
        return "on" if n == len(self.reasons) else "partial" if n else "off"

    @property
    def degraded(self) -> bool:
        """A build is there but some module cannot use it (stale, another interpreter, a binary
        missing or unloadable): not the choice of running pure Python, nor no build at all."""
        return any(not r.startswith(("disabled", "not built")) for r in self.fallbacks().values())

    def fallbacks(self) -> dict[str, str]:
        return {m: r for m, r in self.reasons.items() if r != COMPILED}

    def line(self) -> str:
        """One line for people: the state, the count, and why modules run their .py."""
        n, total = self.compiled, len(self.reasons)
        text = f"compiled hot path: {self.state} ({n} of {total} modules"
        text += f", Cython {self.cython})" if n else ")"
        why = sorted(set(self.fallbacks().values()))
        if n == 0 and len(why) == 1:
            text += f": {why[0]}"
        elif n < total:
            text += "; pure Python: " + ", ".join(f"{m} ({r})" for m, r in self.fallbacks().items())
        if self.degraded:
            text += f"; rebuild: {BUILD_COMMAND}"
        return text


_finder: AccelFinder | None = None
_disabled_by: str | None = None  # KAFKATOOL_PURE_PYTHON's value when install() was called


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (``import kafkatool`` does), unless disabled or
    nothing was built."""
    global _finder, _disabled_by
    if _finder is not None:
        return
    if disabled():
        _disabled_by = os.environ[DISABLE_ENV]
    elif os.path.exists(os.path.join(ACCEL_DIR, MANIFEST_NAME)):
        _finder = AccelFinder()
        sys.meta_path.insert(0, _finder)


def status() -> Status:
    """This process's compiled hot path (as decided when ``kafkatool`` was imported)."""
    if _finder is not None:
        return _finder.status()
    if _disabled_by is not None:
        return Status(dict.fromkeys(MODULES, f"disabled by {DISABLE_ENV}={_disabled_by}"), None)
    return AccelFinder().status()
