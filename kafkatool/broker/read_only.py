"""What ``serve --read-only`` refuses, said the same way everywhere: to the client and in the log.

Clients get Kafka's error codes (POLICY_VIOLATION for produce and admin
changes, with an error message that says read-only where the response has a
message field; TOPIC_AUTHORIZATION_FAILED for a producer's auto-creation of an
unknown topic, which librdkafka and the Java client treat as final instead of
waiting for the topic to appear).  The broker logs one warning per refused
(kind, topic, client) so an operator sees why a client fails.
"""

from __future__ import annotations

import logging

log = logging.getLogger("kafkatool.broker")

READ_ONLY_MSG = "read-only broker (kafkatool serve --read-only): the log dir is never written"

_seen: set[tuple[str, str, str]] = set()
_SEEN_MAX = 4096


def log_refusal(kind: str, topic: str, client_id: str | None) -> None:
    """One warning line per (kind, topic, client)."""
    key = (kind, topic, client_id or "")
    if key in _seen:
        return
    if len(_seen) >= _SEEN_MAX:
        _seen.clear()
    _seen.add(key)
    log.warning(
        "read-only: refused %s topic=%s client_id=%s",
        kind,
        topic,
        client_id or "-",
    )
