"""One local Spark session and one synthetic fleet for the whole fleet suite (Spark start-up
and writing the fleet cost seconds; every test shares them)."""

from __future__ import annotations

import os

import pytest
from fleet.fleetgen import build_fleet


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    # loopback only, and every scratch dir under pytest's tmp (CI runs as root with any HOME)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    tmp = tmp_path_factory.mktemp("spark")
    from kafkatool.fleet.job import make_spark

    session = make_spark(
        "local[2]",
        app_name="kafkatool-fleet-tests",
        conf={
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "4",
            "spark.local.dir": str(tmp / "local"),
            "spark.sql.warehouse.dir": str(tmp / "warehouse"),
            "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={tmp} -Dderby.system.home={tmp}",
        },
    )
    yield session
    session.stop()


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
