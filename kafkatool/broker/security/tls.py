"""TLS for SSL and SASL_SSL listeners with Kafka's ``ssl.*`` settings, on the standard ``ssl`` module.

Kafka's names and meaning: ``ssl.keystore.type`` PEM (inline
``ssl.keystore.certificate.chain``/``ssl.keystore.key`` or a file at
``ssl.keystore.location`` holding key and chain) or PKCS12 (read with the
``cryptography`` package, since ``ssl`` loads PEM only); the same for the
truststore; ``ssl.client.auth`` none/requested/required; ``ssl.enabled.protocols``;
``ssl.cipher.suites`` with the IANA names Java uses; and the principal taken from
the client certificate's distinguished name through ``ssl.principal.mapping.rules``
(Kafka's SslPrincipalMapper).  Every setting may be given per listener as
``listener.name.<name>.ssl.…``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
import ssl
import tempfile
from asyncio import sslproto
from collections.abc import Callable

from kafkatool.broker.config import ConfigError
from kafkatool.broker.security import tls_alert

log = logging.getLogger("kafkatool.broker")

ANONYMOUS = "User:ANONYMOUS"

_PROTOCOLS = {
    "TLSV1": ssl.TLSVersion.TLSv1,
    "TLSV1.1": ssl.TLSVersion.TLSv1_1,
    "TLSV1.2": ssl.TLSVersion.TLSv1_2,
    "TLSV1.3": ssl.TLSVersion.TLSv1_3,
}
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}

Getter = Callable[[str], "str | None"]


def iana_to_openssl(name: str) -> str:
    """TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 -> ECDHE-RSA-AES256-GCM-SHA384 (OpenSSL's naming)."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        raise ConfigError(f"ssl.cipher.suites: {name!r} is not an IANA TLS 1.2 cipher suite name")
    kx, cipher = name[4:].split("_WITH_", 1)
    kx_part = "" if kx == "RSA" else kx.replace("_", "-")
    cipher = (
        cipher.replace("AES_128_", "AES128-")
        .replace("AES_256_", "AES256-")
        .replace("CHACHA20_POLY1305_", "CHACHA20-POLY1305-")
        .replace("_", "-")
    )
    # CBC suites drop the mode, and SHA-1 MACs are "SHA": ECDHE-RSA-AES128-SHA
    cipher = cipher.replace("-CBC-", "-")
    if cipher.startswith("CHACHA20-POLY1305"):
        cipher = "CHACHA20-POLY1305"
    return f"{kx_part}-{cipher}" if kx_part else cipher


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``: DEFAULT or RULE:pattern/replacement/[LU], first full match wins."""

    _RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|\n|$)")

    def __init__(self, rules: str | None):
        self.rules: list[tuple[re.Pattern, str, str] | None] = []
        text = (rules or "DEFAULT").strip()
        pos = 0
        while pos < len(text):
            m = self._RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ConfigError(f"ssl.principal.mapping.rules: invalid rule at {text[pos:]!r}")
            pos = m.end()
            if m.group(1):
                self.rules.append(None)
                continue
            try:
                pattern = re.compile(m.group(2))
            except re.error as exc:
                raise ConfigError(f"ssl.principal.mapping.rules: bad pattern {m.group(2)!r}: {exc}") from None
            # Java's $1 group references
            replacement = re.sub(r"\$(\d+)", r"\\\1", m.group(3))
            self.rules.append((pattern, replacement, m.group(4)))
        if not self.rules:
            self.rules.append(None)

    def name(self, dn: str) -> str:
        for rule in self.rules:
            if rule is None:
                return dn
            pattern, replacement, case = rule
            if pattern.fullmatch(dn):
                out = pattern.sub(replacement, dn)
                return out.lower() if case == "L" else out.upper() if case == "U" else out
        raise PermissionError(f"No rules apply to {dn}, rules {self.rules}")


def certificate_dn(der: bytes) -> str:
    """The subject as Java's X500Principal.getName() gives it (RFC 2253, most specific RDN first)."""
    from cryptography import x509

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def principal_of(ssl_object, mapper: SslPrincipalMapper) -> str:
    """Kafka's DefaultKafkaPrincipalBuilder for SSL: User:<mapped DN>, User:ANONYMOUS without a certificate."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return ANONYMOUS
    return "User:" + mapper.name(certificate_dn(der))


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror}") from None


def _password(value: str | None) -> bytes | None:
    return value.encode() if value else None


def _load_pkcs12(data: bytes, password: str | None, what: str):
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_pkcs12(data, _password(password))
    except ValueError as exc:
        raise ConfigError(f"{what}: cannot read the PKCS12 store (wrong password?): {exc}") from None


def pkcs12_keystore_pem(location: str, password: str | None, what: str) -> tuple[bytes, str]:
    """A PKCS12 keystore's key and chain as PEM, the key encrypted with a one-off password
    (returned with it): for the APIs that load keys from files only (ssl, kazoo)."""
    store = _load_pkcs12(_read(location, what), password, what)
    if store.key is None or store.cert is None:
        raise ConfigError(f"{what} {location}: the PKCS12 store holds no private key entry")
    from cryptography.hazmat.primitives import serialization as ser

    secret = os.urandom(24).hex()
    pem = store.key.private_bytes(
        ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.BestAvailableEncryption(secret.encode())
    )
    pem += store.cert.certificate.public_bytes(ser.Encoding.PEM)
    for extra in store.additional_certs:
        pem += extra.certificate.public_bytes(ser.Encoding.PEM)
    return pem, secret


def pkcs12_truststore_pem(location: str, password: str | None, what: str) -> bytes:
    """The certificates of a PKCS12 truststore as PEM."""
    store = _load_pkcs12(_read(location, what), password, what)
    from cryptography.hazmat.primitives import serialization as ser

    certs = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)
    if not certs:
        raise ConfigError(f"{what} {location}: no certificates in the store")
    return b"".join(c.certificate.public_bytes(ser.Encoding.PEM) for c in certs)


def _load_keystore(ctx: ssl.SSLContext, get: Getter) -> None:
    kind = (get("ssl.keystore.type") or "JKS").strip().upper()
    location = get("ssl.keystore.location")
    chain = get("ssl.keystore.certificate.chain")
    key = get("ssl.keystore.key")
    key_password = get("ssl.key.password")
    if kind == "PEM":
        if chain or key:
            if not (chain and key):
                raise ConfigError("ssl.keystore.certificate.chain and ssl.keystore.key go together")
            if location:
                raise ConfigError("ssl.keystore.location cannot be set with inline PEM keystore settings")
            pem = normalize_pem(chain, "ssl.keystore.certificate.chain") + normalize_pem(
                key, "ssl.keystore.key"
            )
            _load_pem_pair(ctx, pem.encode(), key_password)
            return
        if not location:
            raise ConfigError("ssl.keystore.type=PEM needs ssl.keystore.location or the inline settings")
        _load_pem_pair(ctx, _read(location, "ssl.keystore.location"), key_password)
        return
    if kind == "PKCS12":
        if not location:
            raise ConfigError("ssl.keystore.type=PKCS12 needs ssl.keystore.location")
        # ssl loads keys from files only: an encrypted PEM copy, removed as soon as it is loaded
        pem, secret = pkcs12_keystore_pem(location, get("ssl.keystore.password"), "ssl.keystore.location")
        _load_pem_pair(ctx, pem, secret)
        return
    if kind == "JKS":
        if location is None:
            raise ConfigError("an SSL listener needs a keystore (ssl.keystore.type PEM or PKCS12)")
        raise ConfigError(
            "ssl.keystore.type=JKS is not supported: convert with "
            "keytool -importkeystore -deststoretype PKCS12 and set ssl.keystore.type=PKCS12"
        )
    raise ConfigError(f"ssl.keystore.type {kind!r}: PEM or PKCS12")


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----\s*([^-]*?)\s*-----END \1-----")


def normalize_pem(text: str, what: str) -> str:
    """PEM blocks as Kafka's PemParser reads them: the base64 body may be on one line or
    split anywhere (a properties value joined from continuation lines), whitespace ignored."""
    out = []
    for m in _PEM_BLOCK.finditer(text):
        body = re.sub(r"\s+", "", m.group(2))
        lines = [body[i : i + 64] for i in range(0, len(body), 64)]
        out.append(f"-----BEGIN {m.group(1)}-----\n" + "\n".join(lines) + f"\n-----END {m.group(1)}-----\n")
    if not out:
        raise ConfigError(f"{what}: no PEM block (-----BEGIN ...-----) found")
    return "".join(out)


def _load_pem_pair(ctx: ssl.SSLContext, pem: bytes, password: str | None) -> None:
    fd, path = tempfile.mkstemp(prefix="kafkatool-keystore-", suffix=".pem")
    try:
        os.write(fd, pem)
        os.close(fd)
        ctx.load_cert_chain(path, password=password or None)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"the keystore's key and certificate chain do not load: {exc.reason or exc}"
        ) from None
    finally:
        os.unlink(path)


def _load_truststore(ctx: ssl.SSLContext, get: Getter) -> bool:
    """Load the trusted certificates; False when none are configured."""
    kind = (get("ssl.truststore.type") or "JKS").strip().upper()
    location = get("ssl.truststore.location")
    inline = get("ssl.truststore.certificates")
    try:
        if kind == "PEM":
            if inline:
                ctx.load_verify_locations(cadata=normalize_pem(inline, "ssl.truststore.certificates"))
                return True
            if location:
                ctx.load_verify_locations(cadata=_read(location, "ssl.truststore.location").decode("ascii"))
                return True
            return False
        if kind == "PKCS12":
            if not location:
                return False
            pem = pkcs12_truststore_pem(location, get("ssl.truststore.password"), "ssl.truststore.location")
            ctx.load_verify_locations(cadata=pem.decode("ascii"))
            return True
        if kind == "JKS":
            if location:
                raise ConfigError("ssl.truststore.type=JKS is not supported: use PEM or PKCS12")
            return False
    except ssl.SSLError as exc:
        raise ConfigError(f"the truststore does not load: {exc.reason or exc}") from None
    raise ConfigError(f"ssl.truststore.type {kind!r}: PEM or PKCS12")


def _protocols(ctx: ssl.SSLContext, get: Getter) -> None:
    names = [p.strip() for p in (get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",") if p.strip()]
    versions = []
    for n in names:
        v = _PROTOCOLS.get(n.upper())
        if v is None:
            raise ConfigError(f"ssl.enabled.protocols: {n!r} is not one of TLSv1, TLSv1.1, TLSv1.2, TLSv1.3")
        versions.append(v)
    if not versions:
        raise ConfigError("ssl.enabled.protocols is empty")
    ctx.minimum_version = min(versions)
    ctx.maximum_version = max(versions)


def _ciphers(ctx: ssl.SSLContext, get: Getter) -> None:
    names = [c.strip() for c in (get("ssl.cipher.suites") or "").split(",") if c.strip()]
    if not names:
        return
    tls12 = [iana_to_openssl(n) for n in names if n not in _TLS13_SUITES]
    known = {c["name"] for c in ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).get_ciphers()}
    for iana, openssl_name in zip([n for n in names if n not in _TLS13_SUITES], tls12, strict=True):
        if openssl_name not in known:
            raise ConfigError(f"ssl.cipher.suites: {iana} is not available in this OpenSSL")
    if tls12:
        ctx.set_ciphers(":".join(tls12))
    if not any(n in _TLS13_SUITES for n in names) and ctx.maximum_version >= ssl.TLSVersion.TLSv1_3:
        # Java with only TLS 1.2 suites listed never negotiates TLS 1.3
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    if not tls12 and ctx.minimum_version < ssl.TLSVersion.TLSv1_3:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3


def listener_server_context(config, listener) -> ssl.SSLContext:
    """The SSLContext of one SSL/SASL_SSL listener of a broker ``config``.

    A SASL_SSL listener asks for client certificates only when ``ssl.client.auth`` is set with
    its own ``listener.name.<name>.`` prefix; the broker-wide setting is for SSL listeners
    (Kafka's ChannelBuilders, KIP-684): SASL authenticates those clients."""
    client_auth = None
    if listener.security_protocol == "SASL_SSL":
        client_auth = config.listener_prefixed(listener, "ssl.client.auth") or "none"
        broker_wide = (config.get("ssl.client.auth") or "none").strip().lower()
        if client_auth == "none" and broker_wide != "none":
            log.warning(
                "ssl.client.auth=%s applies to SSL listeners only: the SASL_SSL listener %s asks for no "
                "client certificate (set listener.name.%s.ssl.client.auth to ask for one)",
                broker_wide,
                listener.name,
                listener.name.lower(),
            )
    return server_context(functools.partial(config.listener_setting, listener), client_auth=client_auth)


def server_context(get: Getter, *, client_auth: str | None = None) -> ssl.SSLContext:
    """The SSLContext an SSL/SASL_SSL listener serves with (``get`` resolves listener-prefixed names;
    ``client_auth`` replaces ``ssl.client.auth`` when given)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(ctx, get)
    _ciphers(ctx, get)
    _load_keystore(ctx, get)
    trusted = _load_truststore(ctx, get)
    auth = (client_auth if client_auth is not None else get("ssl.client.auth") or "none").strip().lower()
    mode = _CLIENT_AUTH.get(auth)
    if mode is None:
        raise ConfigError(f"ssl.client.auth {auth!r}: none, requested or required")
    if mode != ssl.CERT_NONE and not trusted:
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    ctx.verify_mode = mode
    if mode != ssl.CERT_NONE and not tls_alert.reject_as_bad_certificate(ctx):
        log.debug("a rejected client certificate gets OpenSSL's alert (no verify callback here)")
    return ctx


def client_context(get: Getter) -> ssl.SSLContext:
    """The SSLContext a client (our commands, the cluster mode's inter-broker link) connects with."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(ctx, get)
    _ciphers(ctx, get)
    if not _load_truststore(ctx, get):
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if get("ssl.keystore.location") or get("ssl.keystore.certificate.chain"):
        _load_keystore(ctx, get)
    algo = get("ssl.endpoint.identification.algorithm")
    ctx.check_hostname = (algo if algo is not None else "https").strip().lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


class _AlertingSSLProtocol(sslproto.SSLProtocol):
    """asyncio's SSLProtocol that sends the peer what OpenSSL wrote when a handshake fails (the
    fatal alert) before the transport closes. Kafka's SslTransportLayer.handshakeFailure flushes
    those bytes "to ensure that the peer is notified of the failure"; asyncio's SSLProtocol
    (CPython gh-98078) closes without them, and a client sees only "connection closed by peer"
    where Kafka's tells it why (an unknown CA, no certificate, no common protocol)."""

    def _on_handshake_complete(self, handshake_exc):
        if handshake_exc is not None:
            try:
                self._process_outgoing()
            except Exception:  # noqa: BLE001 - the close below reports the failure
                pass
        super()._on_handshake_complete(handshake_exc)


async def accept_tls(writer: asyncio.StreamWriter, ctx: ssl.SSLContext, *, handshake_timeout: float) -> None:
    """``writer.start_tls(ctx)`` on an accepted connection, server side, with the failed handshake's
    alert sent (``_AlertingSSLProtocol``): StreamWriter.start_tls and loop.start_tls's steps with
    that protocol. Falls back to ``start_tls`` where asyncio's internals differ."""
    loop = asyncio.get_running_loop()
    transport = writer.transport
    protocol = getattr(writer, "_protocol", None)
    if (
        not hasattr(sslproto.SSLProtocol, "_process_outgoing")
        or not (hasattr(protocol, "_replace_transport") or hasattr(protocol, "_replace_writer"))
        or not getattr(transport, "_start_tls_compatible", False)
    ):
        await writer.start_tls(ctx, ssl_handshake_timeout=handshake_timeout)
        return
    await writer.drain()
    waiter = loop.create_future()
    ssl_protocol = _AlertingSSLProtocol(
        loop,
        protocol,
        ctx,
        waiter,
        server_side=True,
        ssl_handshake_timeout=handshake_timeout,
        call_connection_made=False,
    )
    transport.pause_reading()
    transport.set_protocol(ssl_protocol)
    made = loop.call_soon(ssl_protocol.connection_made, transport)
    resumed = loop.call_soon(transport.resume_reading)
    try:
        await waiter
    except BaseException:
        transport.close()
        made.cancel()
        resumed.cancel()
        raise
    writer._transport = ssl_protocol._app_transport
    if hasattr(protocol, "_replace_transport"):  # Python 3.13+
        protocol._replace_transport(writer._transport)
    else:
        protocol._replace_writer(writer)
