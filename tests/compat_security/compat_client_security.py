"""Copied by run_compat_secure.py as ``sitecustomize.py`` into a temp dir put first on the PYTHONPATH
of the compat harness (/work/shared/compat, read-only), so every Python process of it adds the
SASL_SSL settings to the clients its adapters build, without changing the harness.

What it wraps is what c_confluent.py and c_kafkapython.py construct: confluent_kafka's Producer,
Consumer and admin.AdminClient; kafka-python's KafkaProducer, KafkaConsumer and KafkaAdminClient
(kafka-python 3 has no public KafkaClient; each of the three builds its own network client from
the settings given here). A client made any other way gets no settings and, pointed at the
SASL_SSL listener, is refused: it fails, it does not pass over PLAINTEXT.

Settings (all required once KAFKATOOL_COMPAT_SECURITY_PROTOCOL is set; a missing one raises):
KAFKATOOL_COMPAT_SECURITY_PROTOCOL, KAFKATOOL_COMPAT_SASL_MECHANISM, KAFKATOOL_COMPAT_SASL_USERNAME,
KAFKATOOL_COMPAT_SASL_PASSWORD, KAFKATOOL_COMPAT_SSL_CAFILE.
"""

from __future__ import annotations

import os

#: the names of the classes wrapped in this process (run_compat_secure.py's preflight reads it)
WRAPPED: list[str] = []


def _settings() -> dict[str, str] | None:
    if not os.environ.get("KAFKATOOL_COMPAT_SECURITY_PROTOCOL"):
        return None
    env = os.environ
    return {
        "security.protocol": env["KAFKATOOL_COMPAT_SECURITY_PROTOCOL"],
        "sasl.mechanism": env["KAFKATOOL_COMPAT_SASL_MECHANISM"],
        "sasl.username": env["KAFKATOOL_COMPAT_SASL_USERNAME"],
        "sasl.password": env["KAFKATOOL_COMPAT_SASL_PASSWORD"],
        "ssl.ca.location": env["KAFKATOOL_COMPAT_SSL_CAFILE"],
    }


def _merged(given: dict, added: dict) -> dict:
    """``given`` plus ``added``; a client that sets one of these itself, differently, is an error."""
    clash = {k: v for k, v in given.items() if k in added and v != added[k]}
    if clash:
        raise ValueError(f"the compat adapter sets {sorted(clash)} itself; refusing to override")
    return {**given, **added}


def _wrap_confluent(conf: dict[str, str]) -> None:
    import confluent_kafka
    import confluent_kafka.admin

    def secured(base):
        # Producer and Consumer are C types: subclass them (their __init__ reads the dict)
        class Secured(base):
            def __init__(self, config=None, **kw):
                super().__init__(_merged(dict(config or {}), conf), **kw)

        Secured.__name__ = Secured.__qualname__ = base.__name__
        Secured.__module__ = base.__module__
        return Secured

    confluent_kafka.Producer = secured(confluent_kafka.Producer)
    confluent_kafka.Consumer = secured(confluent_kafka.Consumer)
    # AdminClient is a Python class that calls super().__init__ by name: patch its __init__
    admin_cls = confluent_kafka.admin.AdminClient
    admin_init = admin_cls.__init__

    def admin_secured_init(self, config=None, **kw):
        admin_init(self, _merged(dict(config or {}), conf), **kw)

    admin_cls.__init__ = admin_secured_init
    WRAPPED.extend(
        ["confluent_kafka.Producer", "confluent_kafka.Consumer", "confluent_kafka.admin.AdminClient"]
    )


def _wrap_kafka_python(conf: dict[str, str]) -> None:
    import kafka

    kw_conf = {
        "security_protocol": conf["security.protocol"],
        "sasl_mechanism": conf["sasl.mechanism"],
        "sasl_plain_username": conf["sasl.username"],
        "sasl_plain_password": conf["sasl.password"],
        "ssl_cafile": conf["ssl.ca.location"],
    }
    for name in ("KafkaProducer", "KafkaConsumer", "KafkaAdminClient"):
        cls = getattr(kafka, name)
        orig = cls.__init__

        def secured_init(self, *args, _orig=orig, **kw):
            _orig(self, *args, **_merged(kw, kw_conf))

        cls.__init__ = secured_init
        WRAPPED.append(f"kafka.{name}")


_CONF = _settings()
if _CONF is not None:
    # a client library missing from this interpreter is not wrapped; its adapter then fails on
    # its own import, so nothing runs unsecured
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        pass
    else:
        _wrap_confluent(_CONF)
    try:
        import kafka  # noqa: F401
    except ImportError:
        pass
    else:
        _wrap_kafka_python(_CONF)
