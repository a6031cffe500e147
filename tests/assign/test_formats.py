"""Kafka's reassignment JSON: strict reading with clear messages, byte-identical writing."""

import json

import pytest

from kafkatool.assign.formats import (
    ReassignmentFormatError,
    format_legacy_znode,
    format_reassignment,
    parse_legacy_znode,
    parse_reassignment,
    parse_sizes,
    parse_topics_to_move,
)
from kafkatool.formats.errors import FormatError


def test_format_is_kafkas_compact_sorted_json():
    text = format_reassignment({("b", 0): [3, 1], ("a", 10): [1, 2], ("a", 2): [2, 1]})
    assert text == (
        '{"version":1,"partitions":['
        '{"topic":"a","partition":2,"replicas":[2,1],"log_dirs":["any","any"]},'
        '{"topic":"a","partition":10,"replicas":[1,2],"log_dirs":["any","any"]},'
        '{"topic":"b","partition":0,"replicas":[3,1],"log_dirs":["any","any"]}]}'
    )


def test_round_trip_with_log_dirs():
    doc = (
        '{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[3,1,2],'
        '"log_dirs":["any","/data1/k","any"]}]}'
    )
    (t,) = parse_reassignment(doc)
    assert (t.topic, t.partition, t.replicas, t.log_dirs) == ("a", 0, [3, 1, 2], ["any", "/data1/k", "any"])
    assert t.pinned_dirs() == {1: "/data1/k"}
    assert format_reassignment({t.tp: t.replicas}, {t.tp: t.log_dirs}) == doc


def test_version_defaults_to_1_and_log_dirs_to_any():
    (t,) = parse_reassignment('{"partitions":[{"topic":"a","partition":1,"replicas":[1]}]}')
    assert t.log_dirs == ["any"]


@pytest.mark.parametrize(
    "doc, message",
    [
        ('{"version":2,"partitions":[]}', "not supported version field value 2"),
        ('{"version":"1","partitions":[]}', 'not supported version field value "1"'),
        ('{"version":1,"partitions":[]}', "partition reassignment list cannot be empty"),
        ("[]", "expected a JSON object"),
        (
            '{"partitions":[{"topic":"a","partition":0,"replicas":[]}]}',
            "partitions[0] (a-0): partition replica list cannot be empty",
        ),
        (
            '{"partitions":[{"topic":"a","partition":0,"replicas":[1,2,1]}]}',
            "replica list may not contain duplicate entries: broker 1 appears more than once in [1, 2, 1]",
        ),
        (
            '{"partitions":[{"topic":"a","partition":0,"replicas":[1]},{"topic":"b","partition":0,"replicas":[1]},'
            '{"topic":"a","partition":0,"replicas":[2]}]}',
            "partitions[2] (a-0): partition reassignment contains duplicate topic partitions: a-0 (also at partitions[0])",
        ),
        (
            '{"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
            'size of replicas list [1, 2] is different from size of log dirs list ["any"]',
        ),
        (
            '{"partitions":[{"topic":"a","partition":0,"replicas":[1],"log_dirs":["data"]}]}',
            "log dir 'data' for broker 1 must be \"any\" or an absolute path",
        ),
        ('{"partitions":[{"topic":"a","partition":0,"replica":[1]}]}', "unknown key 'replica'"),
        ('{"partitions":[{"topic":"a","replicas":[1]}]}', "partitions[0]: missing 'partition'"),
        (
            '{"partitions":[{"topic":"a","partition":-1,"replicas":[1]}]}',
            "partition must be an integer >= 0, got -1",
        ),
        (
            '{"partitions":[{"topic":"a","partition":true,"replicas":[1]}]}',
            "partition must be an integer >= 0, got true",
        ),
        (
            '{"partitions":[{"topic":"a b","partition":0,"replicas":[1]}]}',
            "'a b' is not a legal Kafka topic name",
        ),
        (
            '{"partitions":[{"topic":"a","partition":0,"replicas":["1"]}]}',
            "replicas must be a list of broker ids",
        ),
        ('{"partitions":[{"topic":"a","partition":0,"replicas":[-1]}]}', "broker id -1 out of range"),
    ],
)
def test_rejected_reassignments(doc, message):
    with pytest.raises(ReassignmentFormatError) as exc:
        parse_reassignment(doc, "plan.json")
    assert str(exc.value).startswith("plan.json: ")
    assert message in str(exc.value)


def test_syntax_error_has_position():
    with pytest.raises(FormatError) as exc:
        parse_reassignment('{"partitions":\n ["é",,2]}', "plan.json")
    assert exc.value.position == 22  # in bytes: the é takes two
    assert "line 2 column 7" in str(exc.value)


def test_topics_to_move():
    assert parse_topics_to_move('{"version":1,"topics":[{"topic":"a"},{"topic":"b"}]}') == ["a", "b"]
    with pytest.raises(ReassignmentFormatError, match="duplicate entries: a"):
        parse_topics_to_move('{"topics":[{"topic":"a"},{"topic":"a"}]}')
    with pytest.raises(ReassignmentFormatError, match="'topics' must be a non-empty list"):
        parse_topics_to_move('{"topics":[]}')
    with pytest.raises(ReassignmentFormatError, match="not supported version field value 3"):
        parse_topics_to_move('{"version":3,"topics":[{"topic":"a"}]}')


def test_legacy_znode_has_no_log_dirs():
    data = format_legacy_znode({("t", 1): [2, 3], ("t", 0): [1]})
    assert (
        data
        == b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":1,"replicas":[2,3]}]}'
    )
    assert parse_legacy_znode(data) == {("t", 0): [1], ("t", 1): [2, 3]}


def test_sizes_object_and_fleet_lines():
    assert parse_sizes('{"partitions":[{"topic":"a","partition":0,"size":10}]}') == {("a", 0): 10}
    lines = "\n".join(
        json.dumps(o)
        for o in [
            {"type": "partition_size", "topic": "a", "partition": 0, "broker": 1, "size": 100},
            {"type": "segment", "path": "/x"},
            {"type": "partition_size", "topic": "a", "partition": 0, "broker": 2, "size": 90},
            {"type": "partition_size", "topic": "b", "partition": 3, "broker": 2, "size": 7},
        ]
    )
    assert parse_sizes(lines) == {("a", 0): 100, ("b", 3): 7}
    with pytest.raises(ReassignmentFormatError, match="line 2: not valid JSON"):
        parse_sizes('{"type":"partition_size","topic":"a","partition":0,"size":1}\n{oops\n')
    with pytest.raises(ReassignmentFormatError, match="size must be an integer >= 0"):
        parse_sizes('{"partitions":[{"topic":"a","partition":0,"size":-5}]}')
    with pytest.raises(ReassignmentFormatError, match="no partition sizes found"):
        parse_sizes('{"type":"segment"}\n')
