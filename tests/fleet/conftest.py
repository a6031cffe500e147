"""One synthetic fleet for the whole fleet suite (writing it costs seconds; every test shares
it), scanned once; the Spark session is the suite's (tests/conftest.py)."""

from __future__ import annotations

import pytest
from fleet.fleetgen import build_fleet


@pytest.fixture(scope="session")
def fleet(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet")
    f = build_fleet(root / "data")
    f.inventory_path = f.inventory(root / "fleet.json")
    return f


@pytest.fixture(scope="session")
def scanned(spark, fleet, tmp_path_factory):
    from kafkatool.fleet import inventory, job

    out = tmp_path_factory.mktemp("scan-out")
    res = job.run_scan(spark, inventory.load_inventory(fleet.inventory_path), output=str(out))
    return res, out
