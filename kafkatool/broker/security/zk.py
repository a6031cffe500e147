"""ZooKeeper over TLS and SASL, with Kafka's settings: what a broker's server.properties or a
tool's ``--zk-tls-config-file`` holds, and the JAAS ``Client`` section Kafka finds through
``-Djava.security.auth.login.config`` (in ``KAFKA_OPTS``).

TLS (KIP-515): ``zookeeper.ssl.client.enable``, ``zookeeper.ssl.keystore.*`` and
``zookeeper.ssl.truststore.*`` (PEM or PKCS12 files; JKS is refused with the conversion
command), ``zookeeper.ssl.endpoint.identification.algorithm`` (HTTPS: the server's
certificate must name the host), ``zookeeper.ssl.enabled.protocols``/``protocol``,
``zookeeper.ssl.cipher.suites``.  ``zookeeper.clientCnxnSocket`` (Java's Netty socket) and the
CRL/OCSP switches have no Python equivalent and are accepted as Kafka's tools accept them.

SASL: the JAAS section named by ``zookeeper.sasl.clientconfig`` (default ``Client``) with
ZooKeeper's DigestLoginModule (``username``/``password``: DIGEST-MD5) unless
``zookeeper.sasl.client=false``; Kerberos (Krb5LoginModule) is refused, said so.

``zookeeper.set.acl=true``: znodes this process creates get Kafka's secure ACLs
(ZkData.defaultAcls: the creator has all rights, everyone may read, except the sensitive
paths, which only the creator reads).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field

from kafkatool.errors import KafkatoolError

#: the names Kafka reads from --zk-tls-config-file (ZkSecurityMigrator, kafka-configs, kafka-acls)
TLS_KEYS = (
    "zookeeper.clientCnxnSocket",
    "zookeeper.ssl.cipher.suites",
    "zookeeper.ssl.client.enable",
    "zookeeper.ssl.crl.enable",
    "zookeeper.ssl.enabled.protocols",
    "zookeeper.ssl.endpoint.identification.algorithm",
    "zookeeper.ssl.keystore.location",
    "zookeeper.ssl.keystore.password",
    "zookeeper.ssl.keystore.type",
    "zookeeper.ssl.ocsp.enable",
    "zookeeper.ssl.protocol",
    "zookeeper.ssl.truststore.location",
    "zookeeper.ssl.truststore.password",
    "zookeeper.ssl.truststore.type",
)
SASL_KEYS = ("zookeeper.sasl.client", "zookeeper.sasl.clientconfig", "zookeeper.set.acl")
JAAS_PROPERTY = "java.security.auth.login.config"
DIGEST_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"

#: ZkData.sensitiveRootPaths: only the creator may read these when ACLs are set
SENSITIVE_PREFIXES = ("/config/users", "/delegation_token")


class ZkSecurityError(KafkatoolError):
    """A ZooKeeper TLS/SASL setting that cannot be used (one line, naming the setting)."""


def java_system_properties(kafka_opts: str | None = None) -> dict[str, str]:
    """The ``-Dkey=value`` flags of ``KAFKA_OPTS`` (how Kafka's scripts pass JVM properties)."""
    text = os.environ.get("KAFKA_OPTS", "") if kafka_opts is None else kafka_opts
    out = {}
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ZkSecurityError(f"KAFKA_OPTS: {exc}") from None
    for w in words:
        if w.startswith("-D") and "=" in w:
            k, _, v = w[2:].partition("=")
            out[k] = v
    return out


_SECTION = re.compile(r"([A-Za-z0-9_.\-]+)\s*\{(.*?)\}\s*;", re.S)


def jaas_section(path: str, name: str) -> str | None:
    """The body of section ``name`` of a JAAS file (None when absent)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ZkSecurityError(f"{JAAS_PROPERTY} {path}: {exc.strerror}") from None
    # comments: // and /* */ as Java's ConfigFile allows
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    for m in _SECTION.finditer(text):
        if m.group(1) == name:
            return m.group(2).strip()
    return None


@dataclass
class ZkSecurity:
    """TLS/SASL of a ZooKeeper connection, and whether created znodes get secure ACLs."""

    props: dict[str, str] = field(default_factory=dict)
    #: kazoo's sasl_options, or None
    sasl: dict | None = None
    set_acl: bool = False
    source: str = ""

    @property
    def tls(self) -> bool:
        return self.props.get("zookeeper.ssl.client.enable", "false").strip().lower() == "true"

    @property
    def sasl_user(self) -> str | None:
        return None if self.sasl is None else self.sasl.get("username")

    @classmethod
    def from_settings(
        cls, props: dict[str, str], *, source: str, system: dict[str, str] | None = None
    ) -> ZkSecurity:
        """From Kafka's settings (a server.properties or a TLS config file) and the JVM system
        properties (``KAFKA_OPTS``: the JAAS file, and ZooKeeper's own names)."""
        system = java_system_properties() if system is None else system
        merged = {k: v for k, v in props.items() if k in TLS_KEYS or k in SASL_KEYS}
        # the system property names of ZooKeeper's client (zookeeper.client.secure, ...)
        if "zookeeper.ssl.client.enable" not in merged and "zookeeper.client.secure" in system:
            merged["zookeeper.ssl.client.enable"] = system["zookeeper.client.secure"]
        for ours, zks in (
            ("zookeeper.ssl.keystore.location", "zookeeper.ssl.keyStore.location"),
            ("zookeeper.ssl.keystore.password", "zookeeper.ssl.keyStore.password"),
            ("zookeeper.ssl.keystore.type", "zookeeper.ssl.keyStore.type"),
            ("zookeeper.ssl.truststore.location", "zookeeper.ssl.trustStore.location"),
            ("zookeeper.ssl.truststore.password", "zookeeper.ssl.trustStore.password"),
            ("zookeeper.ssl.truststore.type", "zookeeper.ssl.trustStore.type"),
        ):
            if ours not in merged and zks in system:
                merged[ours] = system[zks]
        sec = cls(merged, None, merged.get("zookeeper.set.acl", "false").strip().lower() == "true", source)
        jaas = system.get(JAAS_PROPERTY) or props.get(JAAS_PROPERTY)
        enabled = merged.get("zookeeper.sasl.client", system.get("zookeeper.sasl.client", "true"))
        if jaas and enabled.strip().lower() == "true":
            section = merged.get(
                "zookeeper.sasl.clientconfig", system.get("zookeeper.sasl.clientconfig", "Client")
            )
            body = jaas_section(jaas, section)
            if body is not None:
                from kafkatool.broker.config import ConfigError
                from kafkatool.broker.security.sasl import parse_jaas

                try:
                    module, opts = parse_jaas(body, f"{jaas} section {section}")
                except ConfigError as exc:
                    raise ZkSecurityError(str(exc)) from None
                if module != DIGEST_MODULE:
                    raise ZkSecurityError(
                        f"{jaas} section {section}: {module} is not supported for ZooKeeper; use "
                        f"{DIGEST_MODULE} (SASL DIGEST-MD5)"
                    )
                if "username" not in opts or "password" not in opts:
                    raise ZkSecurityError(
                        f"{jaas} section {section}: DigestLoginModule needs username and password"
                    )
                sec.sasl = {
                    "mechanism": "DIGEST-MD5",
                    "username": opts["username"],
                    "password": opts["password"],
                }
        if sec.set_acl and sec.sasl is None and not sec.tls:
            raise ZkSecurityError(
                "zookeeper.set.acl=true needs an authenticated connection (a JAAS Client section or TLS client "
                "certificates): Kafka refuses to start this way too"
            )
        return sec

    @classmethod
    def from_file(cls, path: str) -> ZkSecurity:
        """``--zk-tls-config-file``: Kafka's TLS names (others are ignored, as Kafka ignores them)."""
        from kafkatool.formats import properties

        try:
            with open(path, encoding="latin-1") as f:
                props = properties.parse_properties_text(f.read())
        except OSError as exc:
            raise ZkSecurityError(f"{path}: {exc.strerror}") from None
        return cls.from_settings(props, source=path)

    # ------------------------------------------------------------------ kazoo

    def kazoo_options(self) -> tuple[dict, str | None]:
        """(KazooClient keyword arguments, a private temp dir to remove after close or None)."""
        opts: dict = {}
        tmp = None
        if self.sasl is not None:
            try:
                import puresasl  # noqa: F401  (kazoo's SASL needs it)
            except ImportError:
                raise ZkSecurityError(
                    "ZooKeeper SASL needs the pure-sasl package (./scripts/setup.sh installs it)"
                ) from None
            opts["sasl_options"] = dict(self.sasl)
        if not self.tls:
            return opts, None
        tmp = tempfile.mkdtemp(prefix="kafkatool-zk-tls-")
        try:
            opts.update(self._tls_options(tmp))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return opts, tmp

    def _get(self, key: str) -> str | None:
        v = self.props.get(key)
        return v.strip() if isinstance(v, str) and v.strip() else None

    def _tls_options(self, tmp: str) -> dict:
        from kafkatool.broker.config import ConfigError
        from kafkatool.broker.security import tls as T

        opts: dict = {"use_ssl": True, "verify_certs": True}
        algo = self._get("zookeeper.ssl.endpoint.identification.algorithm")
        opts["check_hostname"] = (algo if algo is not None else "HTTPS").lower() == "https"
        try:
            ks = self._get("zookeeper.ssl.keystore.location")
            if ks:
                kind = (self._get("zookeeper.ssl.keystore.type") or _type_of(ks)).upper()
                password = self._get("zookeeper.ssl.keystore.password")
                if kind == "PEM":
                    opts["certfile"] = opts["keyfile"] = ks
                    if password:
                        opts["keyfile_password"] = password
                elif kind == "PKCS12":
                    pem, secret = T.pkcs12_keystore_pem(ks, password, "zookeeper.ssl.keystore.location")
                    path = _write(tmp, "keystore.pem", pem)
                    opts.update(certfile=path, keyfile=path, keyfile_password=secret)
                else:
                    raise ZkSecurityError(
                        f"zookeeper.ssl.keystore.type {kind}: PEM or PKCS12 (convert a JKS store with "
                        "keytool -importkeystore -deststoretype PKCS12)"
                    )
            ts = self._get("zookeeper.ssl.truststore.location")
            if ts:
                kind = (self._get("zookeeper.ssl.truststore.type") or _type_of(ts)).upper()
                if kind == "PEM":
                    opts["ca"] = ts
                elif kind == "PKCS12":
                    pem = T.pkcs12_truststore_pem(
                        ts,
                        self._get("zookeeper.ssl.truststore.password"),
                        "zookeeper.ssl.truststore.location",
                    )
                    opts["ca"] = _write(tmp, "truststore.pem", pem)
                else:
                    raise ZkSecurityError(
                        f"zookeeper.ssl.truststore.type {kind}: PEM or PKCS12 (convert a JKS store with "
                        "keytool -importkeystore -deststoretype PKCS12)"
                    )
        except ConfigError as exc:
            raise ZkSecurityError(str(exc)) from None
        return opts

    # ------------------------------------------------------------------ ACLs

    def acls_for(self, path: str) -> list | None:
        """Kafka's ZkData.defaultAcls for a znode this process creates (None: ZooKeeper's open ACL)."""
        if not self.set_acl:
            return None
        from kazoo.security import make_acl

        creator = make_acl("auth", "", all=True)
        if any(path == p or path.startswith(p + "/") for p in SENSITIVE_PREFIXES):
            return [creator]
        return [creator, make_acl("world", "anyone", read=True)]


def _type_of(location: str) -> str:
    return (
        "PKCS12"
        if location.lower().endswith((".p12", ".pfx", ".pkcs12"))
        else "PEM"
        if location.lower().endswith((".pem", ".crt"))
        else "JKS"
    )


def _write(tmp: str, name: str, data: bytes) -> str:
    path = os.path.join(tmp, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


#: the process-wide ZooKeeper security a command's --zk-tls-config-file set (None: from KAFKA_OPTS)
_current: ZkSecurity | None = None


def use_zk_security(sec: ZkSecurity | None) -> None:
    global _current
    _current = sec


def current() -> ZkSecurity:
    """What a tool's ZooKeeper connections use: --zk-tls-config-file, else KAFKA_OPTS alone."""
    return _current if _current is not None else ZkSecurity.from_settings({}, source="KAFKA_OPTS")
