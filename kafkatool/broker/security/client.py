"""Client-side security from Kafka's client properties (a ``--command-config`` file).

``security.protocol`` PLAINTEXT/SSL/SASL_PLAINTEXT/SASL_SSL; ``ssl.truststore.*`` /
``ssl.keystore.*`` (PEM or PKCS12, as the broker reads them) and
``ssl.endpoint.identification.algorithm``; ``sasl.mechanism`` PLAIN, SCRAM-SHA-256 or
SCRAM-SHA-512 with the credentials of ``sasl.jaas.config`` (PlainLoginModule /
ScramLoginModule ``username``/``password``) or ``sasl.username``/``sasl.password``.  A
ScramLoginModule with ``tokenauth="true"`` logs in with a delegation token (the token id as
username, its HMAC's base64 as password): the client-first message carries the SCRAM
extension ``tokenauth=true``, as Kafka's ScramLoginModule has it sent.
The wire client (assign/kafka_client.py) calls :meth:`wrap` on each new socket and
:meth:`authenticate` after ApiVersions, as Kafka's clients do.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket

from kafkatool.broker.config import SECURITY_PROTOCOLS, ConfigError
from kafkatool.broker.security import scram, tls
from kafkatool.broker.security.sasl import SUPPORTED, parse_jaas
from kafkatool.errors import KafkatoolError


class AuthenticationError(KafkatoolError):
    pass


class ClientSecurity:
    def __init__(self, props: dict[str, str]):
        self.props = props
        self.protocol = (props.get("security.protocol") or "PLAINTEXT").strip().upper()
        if self.protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"security.protocol {self.protocol!r}: one of {', '.join(SECURITY_PROTOCOLS)}")
        self.ssl_context = tls.client_context(props.get) if self.protocol in ("SSL", "SASL_SSL") else None
        self.mechanism = None
        if self.protocol.startswith("SASL_"):
            self.mechanism = (props.get("sasl.mechanism") or "GSSAPI").strip().upper()
            if self.mechanism not in SUPPORTED:
                raise ConfigError(f"sasl.mechanism {self.mechanism}: one of {', '.join(SUPPORTED)}")
            user, password = props.get("sasl.username"), props.get("sasl.password")
            jaas = props.get("sasl.jaas.config")
            #: SCRAM extensions of the client-first message (ScramLoginModule: tokenauth)
            self.scram_extensions: dict[str, str] = {}
            if jaas:
                _cls, opts = parse_jaas(jaas, "sasl.jaas.config")
                user, password = opts.get("username", user), opts.get("password", password)
                if opts.get("tokenauth", "").lower() == "true" and self.mechanism.startswith("SCRAM-"):
                    self.scram_extensions["tokenauth"] = "true"
            if not user or password is None:
                raise ConfigError(
                    "SASL needs sasl.jaas.config (username=, password=) or sasl.username/sasl.password"
                )
            self.username, self.password = user, password

    @classmethod
    def from_file(cls, path) -> ClientSecurity:
        from kafkatool.formats import properties as props

        try:
            text = open(path, encoding="latin-1").read()
        except OSError as exc:
            raise ConfigError(f"{path}: {exc.strerror}") from None
        return cls(props.parse_properties_text(text))

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        if self.ssl_context is None:
            return sock
        try:
            return self.ssl_context.wrap_socket(sock, server_hostname=host)
        except OSError as exc:
            raise AuthenticationError(
                f"SSL handshake failed: {getattr(exc, 'reason', None) or exc}"
            ) from None

    def authenticate(self, roundtrip) -> None:
        """SaslHandshake v1 + SaslAuthenticate; ``roundtrip(api_key, version, body)`` -> response."""
        steps = self.sasl_exchange()
        try:
            request = next(steps)
            while True:
                request = steps.send(roundtrip(*request))
        except StopIteration:
            pass

    async def authenticate_async(self, roundtrip) -> None:
        """The same exchange over an asyncio connection (the cluster mode's inter-broker links)."""
        steps = self.sasl_exchange()
        try:
            request = next(steps)
            while True:
                request = steps.send(await roundtrip(*request))
        except StopIteration:
            pass

    def sasl_exchange(self):
        """The client side of SASL as a generator: yields (api_key, version, request) and is sent
        each response; returns when authenticated, raises AuthenticationError otherwise."""
        if self.mechanism is None:
            return
        from kafkatool.protocol.generated.sasl_authenticate_request import SaslAuthenticateRequest
        from kafkatool.protocol.generated.sasl_handshake_request import SaslHandshakeRequest

        r = yield (17, 1, SaslHandshakeRequest(mechanism=self.mechanism))
        if r.error_code:
            raise AuthenticationError(
                f"SASL mechanism {self.mechanism} not enabled (broker offers {', '.join(r.mechanisms or [])})"
            )

        def check(resp) -> bytes:
            if resp.error_code:
                raise AuthenticationError(
                    resp.error_message or f"SASL authentication failed ({resp.error_code})"
                )
            return bytes(resp.auth_bytes)

        if self.mechanism == "PLAIN":
            check(
                (
                    yield (
                        36,
                        1,
                        SaslAuthenticateRequest(
                            auth_bytes=b"\0" + self.username.encode() + b"\0" + self.password.encode()
                        ),
                    )
                )
            )
            return
        algo = scram.MECHANISMS[self.mechanism][0]
        name = self.username.replace("=", "=3D").replace(",", "=2C")
        cnonce = base64.b64encode(os.urandom(18)).decode().replace(",", "A")
        first_bare = f"n={name},r={cnonce}" + "".join(f",{k}={v}" for k, v in self.scram_extensions.items())
        server_first = check(
            (yield (36, 1, SaslAuthenticateRequest(auth_bytes=f"n,,{first_bare}".encode())))
        ).decode()
        attrs = dict(p.split("=", 1) for p in server_first.split(","))
        if not attrs.get("r", "").startswith(cnonce):
            raise AuthenticationError("SCRAM: the server nonce does not extend ours")
        salt, iterations = base64.b64decode(attrs["s"]), int(attrs["i"])
        salted = scram.salted_password(self.mechanism, self.password, salt, iterations)
        client_key = hmac.new(salted, b"Client Key", algo).digest()
        stored_key = hashlib.new(algo, client_key).digest()
        without_proof = f"c=biws,r={attrs['r']}"
        auth_message = f"{first_bare},{server_first},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, algo).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        final_msg = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
        final = check((yield (36, 1, SaslAuthenticateRequest(auth_bytes=final_msg)))).decode()
        server_key = hmac.new(salted, b"Server Key", algo).digest()
        expected = base64.b64encode(hmac.new(server_key, auth_message, algo).digest()).decode()
        if final != f"v={expected}":
            raise AuthenticationError("SCRAM: the broker's signature does not verify")


def inter_broker_security(config) -> ClientSecurity | None:
    """How this broker connects to the others: the inter-broker listener's protocol, its
    listener.name.<l>.ssl.* (or ssl.*) stores and ssl.endpoint.identification.algorithm, and for
    SASL sasl.mechanism.inter.broker.protocol with the username/password of that mechanism's
    listener.name.<l>.<mechanism>.sasl.jaas.config, as Kafka's brokers take them."""
    lst = config.inter_broker_listener
    if lst.security_protocol == "PLAINTEXT":
        return None
    props = {"security.protocol": lst.security_protocol}
    for key in (
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.endpoint.identification.algorithm",
        "ssl.enabled.protocols",
        "ssl.cipher.suites",
    ):
        value = config.listener_setting(lst, key)
        if value is not None:
            props[key] = value
    if lst.sasl:
        mech = (config.get("sasl.mechanism.inter.broker.protocol") or "GSSAPI").strip().upper()
        props["sasl.mechanism"] = mech
        jaas = config.listener_setting(lst, f"{mech.lower()}.sasl.jaas.config") or config.listener_setting(
            lst, "sasl.jaas.config"
        )
        if jaas:
            props["sasl.jaas.config"] = jaas
    return ClientSecurity(props)
