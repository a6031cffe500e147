"""Ship the kafkatool package to Spark executors: a zip built on the fly for ``--py-files``."""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

import kafkatool
from kafkatool.accel import ACCEL_DIRNAME

PACKAGE_DIR = Path(kafkatool.__file__).resolve().parent


def build_zip(dest: str | os.PathLike | None = None) -> Path:
    """Zip the ``kafkatool`` package (sources only) to ``dest`` (default: a new temp file).

    The zip has ``kafkatool/`` at its root, so putting it on ``sys.path`` (what
    ``sc.addPyFile`` and ``spark-submit --py-files`` do) makes ``import kafkatool`` work.
    Third-party dependencies (crc32c, compression libraries) must be installed on the
    executors: they are compiled extensions a zip cannot carry."""
    if dest is None:
        fd, name = tempfile.mkstemp(prefix="kafkatool-", suffix=".zip")
        os.close(fd)
        dest = name
    dest = Path(dest)
    tmp = dest.with_name(dest.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for root, dirs, files in os.walk(PACKAGE_DIR):
            # sources only: no bytecode, no compiled hot path (a zip on sys.path cannot load a
            # binary; the executors run the .py)
            dirs[:] = sorted(
                d for d in dirs if d not in ("__pycache__", ACCEL_DIRNAME) and not d.startswith(".")
            )
            for f in sorted(files):
                if f.endswith((".pyc", ".pyo")):
                    continue
                p = Path(root) / f
                zf.write(p, str(Path("kafkatool") / p.relative_to(PACKAGE_DIR)))
    os.replace(tmp, dest)
    return dest
