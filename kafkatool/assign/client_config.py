"""What Kafka's clients do with a config value and name, once for the console tools' producer
(assign/producer_config) and consumer (assign/group_consumer): ConfigDef's parse and validators
with ConfigException's words, which names are client security (handed to the client's
ClientSecurity, the parser of --command-config), and AbstractConfig.logUnused's line for a name
the client does not know."""

from __future__ import annotations

from kafkatool.errors import KafkatoolError
from kafkatool.log import topic_settings as ts
from kafkatool.log.topic_settings import config_value_error

INT_MAX = 2**31 - 1
_TYPES = {"INT": ts.INT, "LONG": ts.LONG, "BOOLEAN": ts.BOOLEAN, "STRING": ts.STRING}


class ClientConfigError(KafkatoolError):
    """Kafka's ConfigException (or a config the client cannot honour): one line, exit 2."""


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
    (Range.atLeast/between, ValidString.in): log/topic_settings.config_value_error's rule,
    the broker's for its dynamic configs; the parsed value, or ``error`` with Kafka's words."""
    message = config_value_error(name, _TYPES[kind], raw, low, high, choices)
    if message is not None:
        raise error(message)
    value = raw.strip()
    if kind in ("INT", "LONG"):
        return int(value)
    if kind == "BOOLEAN":
        return value.lower() == "true"
    return value


def is_security_config(name: str) -> bool:
    """A config of the client's security (CommonClientConfigs, SslConfigs, SaslConfigs)."""
    return name == "security.protocol" or name.startswith(("ssl.", "sasl."))


def unknown_config(name: str) -> str:
    """AbstractConfig.logUnused's warning for a config the client does not know (it goes on)."""
    return f"The configuration '{name}' was supplied but isn't a known config."
