"""What a test learns from a librdkafka client without waiting out the client's own timeouts:
that a reader has read everything, that a broker refused a connection."""

from __future__ import annotations

import time


def at_high_watermarks(c, tps) -> bool:
    """The consumer ``c`` has been given every record below each partition's high watermark (as
    its last fetch of the partition said, which came after the records were written): nothing
    more (no duplicate, no extra record) can come. ``tps``: the assigned TopicPartitions."""
    for tp in c.position(tps):
        _, high = c.get_watermark_offsets(tp, cached=True)
        # unknown (no fetch answered yet) is negative; so is the position before any record
        if high < 0 or max(tp.offset, 0) < high:
            return False
    return True


def metadata_or_refusal(conf: dict, refusal: str, timeout: float = 6.0, errors: list | None = None):
    """An AdminClient's Metadata answer (confluent_kafka ClusterMetadata) over ``conf``, or None
    once the client's error callback reports an error whose text contains ``refusal`` (a TLS
    alert, a SASL failure: librdkafka retries such a connection until its timeout, so a refusal
    is seen here, not waited out). Neither within ``timeout``: AssertionError. ``errors``: a
    list that gets the client's errors (KafkaError)."""
    from confluent_kafka.admin import AdminClient

    errors = [] if errors is None else errors
    admin = AdminClient({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return admin.list_topics(timeout=0.5)
        except Exception:  # noqa: BLE001 - not answered (yet)
            admin.poll(0)  # serves error_cb
        if any(refusal in e.str() for e in errors):
            return None
    raise AssertionError(
        f"neither answered nor refused ({refusal!r}) in {timeout}s: {[e.str() for e in errors][-3:]}"
    )
