"""What Kafka's clients do with a config value and name, once for the console tools' producer
(assign/producer_config) and consumer (assign/group_consumer): ConfigDef's parse and validators
with ConfigException's words, which names are client security (handed to the client's
ClientSecurity, the parser of --command-config), and AbstractConfig.logUnused's line for a name
the client does not know."""

from __future__ import annotations

import re

from kafkatool.errors import KafkatoolError

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
_INTEGER = re.compile(r"[+-]?[0-9]+\Z")


class ClientConfigError(KafkatoolError):
    """Kafka's ConfigException (or a config the client cannot honour): one line, exit 2."""


def invalid(name: str, value: str, why: str, error: type[ClientConfigError] = ClientConfigError):
    # ConfigException(name, value, message)
    return error(f"Invalid value {value} for configuration {name}: {why}")


def parse_value(
    name: str,
    raw: str,
    kind: str,
    low: int | None = None,
    high: int | None = None,
    choices: list[str] | None = None,
    error: type[ClientConfigError] = ClientConfigError,
) -> int | bool | str:
    """ConfigDef.parseType of ``kind`` (INT, LONG, BOOLEAN, STRING) and the value's validator
    (Range.atLeast/between, ValidString.in)."""
    value = raw.strip()
    if kind in ("INT", "LONG"):
        bound = INT_MAX if kind == "INT" else LONG_MAX
        if not _INTEGER.match(value) or not -bound - 1 <= int(value) <= bound:
            raise invalid(name, raw, f"Not a number of type {kind}", error)
        number = int(value)
        if low is not None and number < low:
            raise invalid(name, value, f"Value must be at least {low}", error)
        if high is not None and number > high:
            raise invalid(name, value, f"Value must be no more than {high}", error)
        return number
    if kind == "BOOLEAN":
        if value.lower() not in ("true", "false"):
            raise invalid(name, raw, "Expected value to be either true or false", error)
        return value.lower() == "true"
    if choices is not None and value not in choices:
        raise invalid(name, value, "String must be one of: " + ", ".join(choices), error)
    return value


def is_security_config(name: str) -> bool:
    """A config of the client's security (CommonClientConfigs, SslConfigs, SaslConfigs)."""
    return name == "security.protocol" or name.startswith(("ssl.", "sasl."))


def unknown_config(name: str) -> str:
    """AbstractConfig.logUnused's warning for a config the client does not know (it goes on)."""
    return f"The configuration '{name}' was supplied but isn't a known config."
