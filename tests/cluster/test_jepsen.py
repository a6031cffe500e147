"""Random faults against three brokers under idempotent acks=all producers (tests/cluster/jepsen.py):
no acknowledged or once-read record is lost, duplicated or reordered."""

from __future__ import annotations

import os

import pytest

from tests.cluster import jepsen

pytest.importorskip("confluent_kafka")


def test_random_faults_lose_nothing(cluster):
    seed = int(os.environ.get("JEPSEN_SEED", "1"))
    report = jepsen.run(cluster, topic="jepsen", partitions=3, seconds=30, seed=seed, session_s=6.0)
    print(report.summary())
    assert report.faults, "the nemesis did nothing"
    assert report.acked > 1000
    assert report.ok, (report.lost[:10], report.duplicated[:10], report.reordered[:10])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_random_faults_lose_nothing_long(cluster, seed):
    report = jepsen.run(cluster, topic="jepsen", partitions=3, seconds=180, seed=seed, session_s=6.0)
    print(report.summary())
    assert report.ok, (report.lost[:10], report.duplicated[:10], report.reordered[:10])
