"""Loaded by the compat harness's client processes (PYTHONPATH) when run_sasl_ssl.py drives it: adds
the SASL_SSL settings of KAFKATOOL_COMPAT_SECURITY (librdkafka property names, JSON) to every
confluent-kafka and kafka-python client the harness creates, without changing the harness."""

from __future__ import annotations

import json
import os

_CONF = json.loads(os.environ.get("KAFKATOOL_COMPAT_SECURITY") or "{}")

if _CONF:
    try:
        import confluent_kafka
        import confluent_kafka.admin

        def _wrap(base):
            class Secured(base):
                def __init__(self, conf=None, **kw):
                    super().__init__({**(conf or {}), **_CONF}, **kw)

            Secured.__name__ = base.__name__
            return Secured

        # Producer/Consumer are C types (subclassed); AdminClient names itself in super(): patch __init__
        confluent_kafka.Producer = _wrap(confluent_kafka.Producer)
        confluent_kafka.Consumer = _wrap(confluent_kafka.Consumer)
        _admin_init = confluent_kafka.admin.AdminClient.__init__

        def _secured_admin_init(self, conf=None, **kw):
            _admin_init(self, {**(conf or {}), **_CONF}, **kw)

        confluent_kafka.admin.AdminClient.__init__ = _secured_admin_init
    except ImportError:
        pass
    try:
        import kafka

        _KP = {
            "security_protocol": _CONF["security.protocol"],
            "sasl_mechanism": _CONF["sasl.mechanism"],
            "sasl_plain_username": _CONF["sasl.username"],
            "sasl_plain_password": _CONF["sasl.password"],
            "ssl_cafile": _CONF["ssl.ca.location"],
        }

        def _patch(cls):
            orig = cls.__init__

            def __init__(self, *args, **kw):
                orig(self, *args, **{**kw, **_KP})

            cls.__init__ = __init__

        for _name in ("KafkaProducer", "KafkaConsumer", "KafkaAdminClient"):
            _patch(getattr(kafka, _name))
    except ImportError:
        pass
