"""Issue 12: `man kafkatool` works after the README's install command (./scripts/setup.sh)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from conftest import REPO

MAN = shutil.which("man")


@pytest.mark.skipif(MAN is None, reason="man is not installed")
def test_install_man_pages_where_man_finds_them(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MANPATH"}
    target = tmp_path / "share" / "man"
    r = subprocess.run(
        [str(REPO / "scripts" / "install-man.sh")],
        env={**env, "MANDIR": str(target)},
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    pages = {p.name for p in (REPO / "man").glob("*.1")}
    assert {p.name for p in (target / "man1").iterdir()} == pages
    for page in ("kafkatool", "kafkatool-retention", "kafkatool-zk-restore"):
        out = subprocess.run(
            [MAN, "-P", "cat", page], env={**env, "MANPATH": str(target)}, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        assert page.upper() in out.stdout
    # the default target is in man's own search path, and setup.sh (the README's install command) installs there
    default = subprocess.run(["manpath"], env=env, capture_output=True, text=True).stdout
    assert "/usr/local/share/man" in default.strip().split(":")
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert "./scripts/install-man.sh" in setup
    assert "./scripts/setup.sh" in (REPO / "README.md").read_text()
