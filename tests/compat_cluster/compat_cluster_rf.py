"""Copied by run_compat_cluster.py as ``sitecustomize.py`` into a temp dir put first on the PYTHONPATH
of the compat harness (/work/shared/compat, read-only), so every topic the harness creates gets the
replication factor of KAFKATOOL_COMPAT_REPLICATION_FACTOR (default 3) instead of the 1 its adapters
ask for, without changing the harness (issue 13: the matrix against a replicated cluster).

What it wraps is how the adapters create topics:

- c_confluent.py (and c_kcat.py, which borrows c_confluent.create_topic for its set-up):
  ``confluent_kafka.admin.AdminClient.create_topics([NewTopic(topic, partitions, 1)], ...)``;
- c_kafkapython.py: ``kafka.KafkaAdminClient.create_topics({topic: {"num_partitions": n,
  "replication_factor": 1}}, ...)``; kafka-python's other input forms (a list of
  ``kafka.admin.NewTopic``, a list of names) are handled too.

Only an explicit replication factor 1 is replaced: -1 (the broker's default.replication.factor),
an explicit replica assignment and any other factor are passed on as given. The caller's objects
are never changed (copies are sent). Each substitution is appended as a JSON line to the file in
KAFKATOOL_COMPAT_RF_LOG when set, so the runner knows which topics to check in ZooKeeper.

Imported under another name (the unit tests), it wraps nothing until ``install`` is called.
"""

from __future__ import annotations

import copy
import json
import os

ENV_RF = "KAFKATOOL_COMPAT_REPLICATION_FACTOR"
ENV_LOG = "KAFKATOOL_COMPAT_RF_LOG"
DEFAULT_RF = 3

#: the names of the methods wrapped in this process (run_compat_cluster.py's preflight reads it)
WRAPPED: list[str] = []


def replication_factor() -> int:
    rf = int(os.environ.get(ENV_RF) or DEFAULT_RF)
    if rf < 1:
        raise ValueError(f"{ENV_RF}={rf}: a replication factor is at least 1")
    return rf


def _record(lib: str, topic: str, given: int, sent: int) -> None:
    path = os.environ.get(ENV_LOG)
    if not path:
        return
    line = json.dumps({"lib": lib, "topic": topic, "given": given, "sent": sent, "pid": os.getpid()})
    # O_APPEND: one write per line, so lines of concurrent processes do not interleave
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def confluent_topics(new_topics, rf: int) -> list:
    """confluent-kafka's ``create_topics`` argument with every NewTopic of replication factor 1
    replaced by a new NewTopic of replication factor ``rf`` (same name, partitions, config)."""
    from confluent_kafka.admin import NewTopic

    out = []
    for t in new_topics:
        if isinstance(t, NewTopic) and t.replication_factor == 1 and not t.replica_assignment:
            kw = {"config": dict(t.config)} if t.config else {}
            out.append(NewTopic(t.topic, t.num_partitions, rf, **kw))
            _record("confluent-kafka", t.topic, 1, rf)
        else:
            out.append(t)
    return out


def kafka_python_topics(new_topics, rf: int):
    """kafka-python's ``create_topics`` argument (a dict {name: options}, a list of NewTopic or a
    list of names) with every replication factor 1 replaced by ``rf``."""
    if isinstance(new_topics, dict):
        out = {}
        for name, options in new_topics.items():
            options = dict(options or {})
            if options.get("replication_factor") == 1 and not options.get("assignments"):
                options["replication_factor"] = rf
                _record("kafka-python", name, 1, rf)
            out[name] = options
        return out
    out = []
    for t in new_topics:
        if (
            not isinstance(t, str)
            and getattr(t, "replication_factor", None) == 1
            and not getattr(t, "replica_assignments", None)
        ):
            t = copy.copy(t)
            t.replication_factor = rf
            _record("kafka-python", t.name, 1, rf)
        out.append(t)
    return out


def _wrap(cls, label: str, convert, rf: int) -> None:
    orig = cls.create_topics

    def create_topics(self, new_topics, *args, **kw):
        return orig(self, convert(new_topics, rf), *args, **kw)

    create_topics.__wrapped__ = orig
    cls.create_topics = create_topics
    WRAPPED.append(f"{label}.create_topics")


def wrap_confluent(rf: int) -> None:
    from confluent_kafka.admin import AdminClient

    _wrap(AdminClient, "confluent_kafka.admin.AdminClient", confluent_topics, rf)


def wrap_kafka_python(rf: int) -> None:
    import kafka

    _wrap(kafka.KafkaAdminClient, "kafka.KafkaAdminClient", kafka_python_topics, rf)


def install(rf: int | None = None) -> int:
    """Wrap both libraries' create_topics (a library missing from this interpreter is skipped:
    its adapter then fails on its own import). Returns the factor used."""
    rf = replication_factor() if rf is None else rf
    try:
        import confluent_kafka.admin  # noqa: F401
    except ImportError:
        pass
    else:
        wrap_confluent(rf)
    try:
        import kafka  # noqa: F401
    except ImportError:
        pass
    else:
        wrap_kafka_python(rf)
    return rf


#: the factor this process substitutes (None until installed)
RF: int | None = install() if __name__ == "sitecustomize" else None
