"""Java's text formatting where Kafka's tools print with it: ``String.format``'s ``%.Nf`` of a
double (java.util.Formatter) and ``java.text.SimpleDateFormat`` of a millisecond timestamp.
Pure functions: the time zone is the caller's."""

from __future__ import annotations

import datetime as dt
import math
from decimal import ROUND_HALF_UP, Decimal

from kafkatool.errors import KafkatoolError


class JavaFormatError(KafkatoolError):
    """A pattern Java refuses (SimpleDateFormat's IllegalArgumentException) or one kafkatool does
    not implement: one line, exit 2."""


def fixed(value: float, digits: int) -> str:
    """``String.format("%.<digits>f", value)``: NaN and Infinity as Java writes them, and Java's
    rounding, HALF_UP of the double's shortest decimal form (FormattedFloatingDecimal), not of its
    binary value (Java prints 0.125 as 0.13 and 2.675 as 2.68; Python's format 0.12 and 2.67)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    q = Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{q:f}"


#: SimpleDateFormat's pattern letters (DateFormatSymbols.patternChars)
_PATTERN_CHARS = "GyMdkHmsSEDFwWahKzZYuXL"
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


class SimpleDateFormat:
    """``new SimpleDateFormat(pattern)`` in the US locale: its letters G y M L d D E u a H k K h m s
    S z Z X, quoted text ('...', '' for a quote) and any other character as it is. The week
    letters (Y w W F) depend on a locale's week rules and are refused, not guessed."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        self.parts: list[tuple[str, int] | str] = []
        i, n = 0, len(pattern)
        while i < n:
            c = pattern[i]
            if c == "'":
                if i + 1 < n and pattern[i + 1] == "'":
                    self.parts.append("'")
                    i += 2
                    continue
                end = i + 1
                text = []
                while True:
                    if end >= n:
                        raise JavaFormatError(f"Unterminated quote in date format {pattern!r}")
                    if pattern[end] == "'":
                        if end + 1 < n and pattern[end + 1] == "'":
                            text.append("'")
                            end += 2
                            continue
                        break
                    text.append(pattern[end])
                    end += 1
                self.parts.append("".join(text))
                i = end + 1
            elif ("a" <= c <= "z") or ("A" <= c <= "Z"):
                if c not in _PATTERN_CHARS:
                    raise JavaFormatError(f"Illegal pattern character '{c}'")
                if c in "YwWF":
                    raise JavaFormatError(
                        f"date format {pattern!r}: the week letter '{c}' depends on a locale's week rules, "
                        "which kafkatool does not implement"
                    )
                count = 1
                while i + count < n and pattern[i + count] == c:
                    count += 1
                if c == "X" and count > 3:
                    raise JavaFormatError(f"invalid ISO 8601 format: length={count}")
                self.parts.append((c, count))
                i += count
            else:
                self.parts.append(c)
                i += 1

    def format(self, ms: int, tz: dt.tzinfo | None = None) -> str:
        """The text of the instant ``ms`` (epoch milliseconds) in ``tz`` (None: the machine's
        zone, the JVM's default)."""
        seconds, millis = divmod(ms, 1000)
        t = dt.datetime.fromtimestamp(seconds, tz) if tz is not None else dt.datetime.fromtimestamp(seconds)
        t = t.astimezone() if tz is None else t
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
            else:
                out.append(_field(t, millis, *part))
        return "".join(out)


def _num(value: int, count: int) -> str:
    return str(value).rjust(count, "0")


def _offset(t: dt.datetime, colon: bool, minutes: bool) -> str:
    off = t.utcoffset() or dt.timedelta(0)
    total = int(off.total_seconds()) // 60
    sign = "-" if total < 0 else "+"
    h, m = divmod(abs(total), 60)
    if not minutes:
        return f"{sign}{h:02d}"
    return f"{sign}{h:02d}{':' if colon else ''}{m:02d}"


def _field(t: dt.datetime, millis: int, c: str, count: int) -> str:
    if c == "G":
        return "AD" if t.year > 0 else "BC"
    if c == "y":
        return _num(t.year % 100, 2) if count == 2 else _num(t.year, count)
    if c in "ML":
        if count >= 4:
            return _MONTHS[t.month - 1]
        if count == 3:
            return _MONTHS[t.month - 1][:3]
        return _num(t.month, count)
    if c == "d":
        return _num(t.day, count)
    if c == "D":
        return _num(t.timetuple().tm_yday, count)
    if c == "E":
        return _DAYS[t.weekday()] if count >= 4 else _DAYS[t.weekday()][:3]
    if c == "u":
        return _num(t.isoweekday(), count)
    if c == "a":
        return "AM" if t.hour < 12 else "PM"
    if c == "H":
        return _num(t.hour, count)
    if c == "k":
        return _num(t.hour or 24, count)
    if c == "K":
        return _num(t.hour % 12, count)
    if c == "h":
        return _num(t.hour % 12 or 12, count)
    if c == "m":
        return _num(t.minute, count)
    if c == "s":
        return _num(t.second, count)
    if c == "S":
        return _num(millis, count)
    if c == "z":
        return t.tzname() or _offset(t, True, True)
    if c == "Z":
        return _offset(t, False, True)
    # X: ISO 8601, "Z" for a zero offset
    if not (t.utcoffset() or dt.timedelta(0)):
        return "Z"
    return _offset(t, count == 3, count >= 2)
