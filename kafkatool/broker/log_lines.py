"""The broker's log lines (``serve --log-format text|json``): one line a record, Kafka-style
``key=value`` fields in text, the same fields typed in JSON; a member process of
``kafkatool.processes`` adds its number to every line."""

from __future__ import annotations

import json
import logging
import re
import sys
import time

_INT = re.compile(r"-?(0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(0|[1-9][0-9]*)\.[0-9]+([eE][-+]?[0-9]+)?")


def json_value(v: str):
    """A key=value log field as JSON: numbers and booleans typed, JSON-quoted strings decoded."""
    if v in ("true", "false"):
        return v == "true"
    if _INT.fullmatch(v):
        return int(v)
    if _FLOAT.fullmatch(v):
        return float(v)
    if len(v) >= 2 and v[0] == v[-1] == '"':
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z_][A-Za-z0-9_.]*)=")
_DECODER = json.JSONDecoder()


def split_fields(msg: str) -> tuple[str, dict]:
    """``"text k=v k2=v2"`` -> ("text", {k: v, k2: v2}).  A value runs to the next `` key=``
    (so error messages keep their spaces); a value that starts as JSON (``{``, ``[``, ``"``) is
    decoded; numbers and booleans are typed (json_value)."""
    m = _KEY.search(msg)
    if m is None:
        return msg, {}
    text = msg[: m.start()].strip()
    fields: dict = {}
    while m is not None:
        key, start = m.group(1), m.end()
        if start < len(msg) and msg[start] in '{["':
            try:
                value, end = _DECODER.raw_decode(msg, start)
            except ValueError:
                value, end = None, -1
            if end >= 0 and (end == len(msg) or msg[end] == " "):
                fields[key] = value
                m = _KEY.search(msg, end)
                continue
        nxt = _KEY.search(msg, start)
        raw = msg[start : nxt.start() if nxt else len(msg)].rstrip()
        fields[key] = json_value(raw)
        m = nxt
    return text, fields


class JsonFormatter(logging.Formatter):
    def __init__(self, process: int | None = None):
        super().__init__()
        #: a member process of a broker of several (kafkatool.processes): its number, on every line
        self.process = process

    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        d = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        if self.process is not None:
            d["process"] = self.process
        text, fields = split_fields(msg)
        d["msg"] = text
        d.update(fields)
        if record.exc_info:
            d["exc"] = self.formatException(record.exc_info)
        return json.dumps(d, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self, process: int | None = None):
        super().__init__()
        self.process = process

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        proc = "" if self.process is None else f" process={self.process}"
        line = f"{ts} level={record.levelname.lower()} logger={record.name}{proc} {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def setup_logging(fmt: str, level: str, *, process: int | None = None) -> None:
    """kafkatool's log lines on stderr; ``process``: the number of a broker's member process
    (kafkatool.processes), a field of every line it logs."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(process) if fmt == "json" else TextFormatter(process))
    root = logging.getLogger("kafkatool")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
