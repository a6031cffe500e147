"""Errors.message() of every code (protocol.errors.default_message): what a response built from an
Errors alone carries (FindCoordinator's, AlterClientQuotas' getErrorResponse, ApiError(Errors))
and the message of the exception a client makes of a bare code.  Until session 26 the table held
17 codes; the others answered no message where Kafka sends its text."""

from __future__ import annotations

from kafkatool.protocol.errors import ErrorCode, default_message


def test_every_code_but_none_has_kafkas_message():
    assert default_message(ErrorCode.NONE) is None
    missing = [c.name for c in ErrorCode if c != ErrorCode.NONE and not default_message(c)]
    assert missing == []


def test_messages_are_kafkas_text():
    # Kafka 3.7.1's Errors, as written there (full stops and all)
    assert default_message(ErrorCode.GROUP_AUTHORIZATION_FAILED) == "Group authorization failed."
    assert default_message(ErrorCode.COORDINATOR_NOT_AVAILABLE) == "The coordinator is not available."
    assert default_message(ErrorCode.NOT_COORDINATOR) == "This is not the correct coordinator."
    assert (
        default_message(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        == "This server does not host this topic-partition."
    )
    assert default_message(ErrorCode.SNAPSHOT_NOT_FOUND) == "Requested snapshot was not found"
    assert default_message(ErrorCode.CORRUPT_MESSAGE) == (
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted "
        "topic, or is otherwise corrupt."
    )
