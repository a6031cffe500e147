"""What ``kafkatool delegation-tokens`` shows of a token (pure: strings and dicts, no I/O):
DelegationTokenCommand.printToken's table, its dates in SimpleDateFormat
``yyyy-MM-dd'T'HH:mm`` of the machine's time zone, and the ``--json`` object."""

from __future__ import annotations

import base64

from kafkatool.formats.java_collections import java_collection_str
from kafkatool.formats.java_format import SimpleDateFormat

_DATE = "yyyy-MM-dd'T'HH:mm"
_WIDTHS = (15, 30, 15, 15, 25, 15, 15, 15)
_HEADERS = ("TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE")


def token_date(ms: int) -> str:
    """A token timestamp as the tool prints it (SimpleDateFormat yyyy-MM-dd'T'HH:mm)."""
    return SimpleDateFormat(_DATE).format(ms)


def _line(cells) -> str:
    return "\n" + " ".join(f"{c:<{w}}" for c, w in zip(cells, _WIDTHS, strict=True)) + "\n"


def token_table(tokens) -> str:
    """printToken: a blank line, the header, and a blank line before each row; ``tokens``:
    (TokenInfo, HMAC bytes) pairs."""
    fmt = SimpleDateFormat(_DATE)
    out = [_line(_HEADERS)]
    for info, mac in tokens:
        out.append(
            _line(
                (
                    info.token_id,
                    base64.b64encode(mac).decode(),
                    info.owner,
                    info.token_requester,
                    java_collection_str(info.renewers),
                    fmt.format(info.issue_timestamp),
                    fmt.format(info.expiry_timestamp),
                    fmt.format(info.max_timestamp),
                )
            )
        )
    return "".join(out)


def token_json(info, mac: bytes) -> dict:
    """A token as one ``--json`` object."""
    return {
        "type": "token",
        "token_id": info.token_id,
        "hmac": base64.b64encode(mac).decode(),
        "owner": info.owner,
        "requester": info.token_requester,
        "renewers": info.renewers,
        "issue_timestamp": info.issue_timestamp,
        "expiry_timestamp": info.expiry_timestamp,
        "max_timestamp": info.max_timestamp,
    }
