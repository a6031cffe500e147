"""SASL on SASL_PLAINTEXT/SASL_SSL listeners: Kafka's SaslServerAuthenticator state machine.

A connection on a SASL listener may send ApiVersions and SaslHandshake first; then
either raw length-prefixed tokens (SaslHandshake v0) or SaslAuthenticate requests
(v1); any other request before authentication closes it, as Kafka does.  PLAIN checks
``user_<name>="password"`` entries of the listener's
``listener.name.<name>.plain.sasl.jaas.config``; SCRAM-SHA-256/512 use the credentials
stored in the cluster metadata (scram.py), or with the extension ``tokenauth=true`` a
delegation token's (tokens.py: the principal is the token's owner, the connection is
token-authenticated and its session ends at the token's expiry).  A failure answers
SASL_AUTHENTICATION_FAILED with Kafka's message after
``connection.failed.authentication.delay.ms`` and closes the connection, with one
"Failed authentication" log line.  ``connections.max.reauth.ms`` (KIP-368) gives each
session a lifetime (SaslAuthenticate v1+), after which only re-authentication is
accepted.

The router calls :meth:`SaslSession.intercept` for every request of a SASL
connection (its one security hook); everything else about a request is the handlers'.
"""

from __future__ import annotations

import logging
import re
import time

from kafkatool.broker.config import ConfigError
from kafkatool.broker.network import CloseConnection
from kafkatool.broker.security import scram

log = logging.getLogger("kafkatool.broker")

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
API_VERSIONS = 18
SUPPORTED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58

_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;"]+)')
_JAAS_HEAD = re.compile(r"\s*([A-Za-z0-9_.$]+)\s+(required|requisite|sufficient|optional)\b")


def parse_jaas(text: str, setting: str) -> tuple[str, dict[str, str]]:
    """``<LoginModule class> <flag> key="value" ...;`` -> (class, options), as Kafka's JaasConfig parses it."""
    m = _JAAS_HEAD.match(text)
    if m is None or not text.rstrip().endswith(";"):
        raise ConfigError(
            f"{setting}: not a JAAS login module configuration ('<class> required key=\"value\";')"
        )
    opts = {}
    for k, v in _JAAS_OPTION.findall(text[m.end() :]):
        if v.startswith('"'):
            v = re.sub(r"\\(.)", r"\1", v[1:-1])
        opts[k] = v
    return m.group(1), opts


class PlainServer:
    """Kafka's PlainSaslServer: ``authzid NUL username NUL password`` checked against user_<name>."""

    def __init__(self, users: dict[str, str]):
        self.users = users
        self.complete = False
        self.username: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        parts = token.decode("utf-8", "replace").split("\0")
        if len(parts) != 3:
            raise scram.ScramError(
                "bad token", f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}"
            )
        authzid, username, password = parts
        if not username:
            raise scram.ScramError("no username", "Authentication failed: username not specified")
        if not password:
            raise scram.ScramError("no password", "Authentication failed: password not specified")
        expected = self.users.get(username)
        if expected is None or expected != password:
            raise scram.ScramError("bad credentials", "Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise scram.ScramError(
                "authzid differs",
                "Authentication failed: Client requested an authorization id that is different from username",
            )
        self.username = username
        self.complete = True
        return b""


class ListenerSasl:
    """A SASL listener's settings: enabled mechanisms, PLAIN users, re-auth and failure delay."""

    def __init__(self, config, listener, credentials, tokens=None):
        get = lambda name: config.listener_setting(listener, name)  # noqa: E731
        raw = get("sasl.enabled.mechanisms") or "GSSAPI"
        self.mechanisms = [m.strip().upper() for m in raw.split(",") if m.strip()]
        for mech in self.mechanisms:
            if mech not in SUPPORTED:
                raise ConfigError(
                    f"listener {listener.name}: sasl.enabled.mechanisms {mech} is not supported "
                    f"(set sasl.enabled.mechanisms to some of {', '.join(SUPPORTED)})"
                )
        if not self.mechanisms:
            raise ConfigError(f"listener {listener.name}: sasl.enabled.mechanisms is empty")
        self.plain_users: dict[str, str] = {}
        if "PLAIN" in self.mechanisms:
            key = f"listener.name.{listener.name.lower()}.plain.sasl.jaas.config"
            text = get("plain.sasl.jaas.config")
            if not text:
                raise ConfigError(
                    f"listener {listener.name} enables PLAIN: set {key} (PlainLoginModule user_<name>=...)"
                )
            cls, opts = parse_jaas(text, key)
            if not cls.endswith("PlainLoginModule"):
                raise ConfigError(
                    f"{key}: {cls} is not org.apache.kafka.common.security.plain.PlainLoginModule"
                )
            self.plain_users = {k[5:]: v for k, v in opts.items() if k.startswith("user_")}
        self.reauth_ms = int(get("connections.max.reauth.ms") or 0)
        self.failure_delay = int(get("connection.failed.authentication.delay.ms") or 100) / 1000.0
        self.credentials = credentials  # (user, mechanism) -> ScramCredential | None
        #: (token id, mechanism) -> (ScramCredential, owner name, expiry ms) | None (delegation tokens)
        self.tokens = tokens

    def server(self, mechanism: str):
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        return scram.ScramServer(mechanism, self.credentials, self.tokens)


class AuthFailed(CloseConnection):
    """Authentication failed: answer (if the protocol allows) after the delay, then close."""

    def __init__(self, response, message: str, delay: float):
        super().__init__(message)
        self.response = response
        self.delay = delay


class SaslSession:
    """The SASL state of one connection (Kafka's SaslServerAuthenticator)."""

    def __init__(self, settings: ListenerSasl, conn):
        self.settings = settings
        self.conn = conn
        self.state = "handshake"  # handshake -> authenticate | raw -> done
        self.mechanism: str | None = None
        self.server = None
        self.expiry: float | None = None
        self.reauthenticating = False
        #: when the last re-authentication began (monotonic seconds)
        self.reauth_started: float | None = None
        self.principal: str | None = None

    @property
    def raw_expected(self) -> bool:
        return self.state == "raw"

    def _fail(self, message: str, response=None):
        self.state = "failed"
        raise AuthFailed(response, message, self.settings.failure_delay)

    # ------------------------------------------------------------------ the router's hook
    def intercept(self, header, body):
        """None: let the request through; else the response message for this SASL request."""
        key = header.api_key
        if self.state == "done":
            if key == SASL_HANDSHAKE and header.api_version >= 1 and self._may_reauthenticate():
                self.reauthenticating = True
                return self._handshake(header, body)
            if self.expiry is not None and time.monotonic() > self.expiry and not self.reauthenticating:
                raise CloseConnection(
                    "SASL session expired (connections.max.reauth.ms) without re-authentication"
                )
            return None
        if self.state == "handshake":
            if key == API_VERSIONS:
                return None
            if key == SASL_HANDSHAKE:
                return self._handshake(header, body)
            self._unexpected(header, "handshake")
        if self.state == "authenticate":
            if key == SASL_AUTHENTICATE:
                return self._authenticate(header, body)
            if self.reauthenticating and key != SASL_HANDSHAKE:
                return None
            self._unexpected(header, "authentication")
        raise CloseConnection(f"unexpected request in SASL state {self.state}")

    def _may_reauthenticate(self) -> bool:
        """KafkaChannel.maybeBeginServerReauthentication: a SaslHandshake after authentication
        begins a re-authentication (KIP-368) only when the session has an expiration
        (connections.max.reauth.ms, a token's lifetime) and none began in the last second;
        else it is an ordinary request, which KafkaApis answers ILLEGAL_SASL_STATE
        (:func:`handle_sasl_handshake`), the connection left as it is."""
        if self.expiry is None:
            return False
        now = time.monotonic()
        if self.reauth_started is not None and now - self.reauth_started < 1.0:
            return False
        self.reauth_started = now
        return True

    def _unexpected(self, header, phase: str):
        from kafkatool.protocol.apis import API_BY_KEY

        info = API_BY_KEY.get(header.api_key)
        name = info.name if info else str(header.api_key)
        raise CloseConnection(f"Unexpected Kafka request of type {name} during SASL {phase}.")

    def _handshake(self, header, body):
        from kafkatool.protocol.generated.sasl_handshake_response import SaslHandshakeResponse

        mech = body.mechanism
        enabled = list(self.settings.mechanisms)
        if mech not in enabled:
            self._fail(
                f"Unsupported SASL mechanism {mech}",
                SaslHandshakeResponse(error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled),
            )
        if self.reauthenticating and mech != self.mechanism:
            self._fail(f"SASL mechanism change from {self.mechanism} to {mech} during re-authentication")
        self.mechanism = mech
        self.server = self.settings.server(mech)
        self.state = "raw" if header.api_version == 0 else "authenticate"
        return SaslHandshakeResponse(error_code=0, mechanisms=enabled)

    def _step(self, token: bytes) -> bytes:
        try:
            return self.server.evaluate(bytes(token))
        except scram.ScramError as exc:
            self.failure = exc
            raise

    def _authenticate(self, header, body):
        from kafkatool.protocol.generated.sasl_authenticate_response import SaslAuthenticateResponse

        try:
            reply = self._step(body.auth_bytes)
        except scram.ScramError as exc:
            msg = exc.client_message or str(exc)
            self._fail(
                f"{msg} ({exc})" if exc.client_message and str(exc) not in msg else msg,
                SaslAuthenticateResponse(
                    error_code=SASL_AUTHENTICATION_FAILED, error_message=msg, auth_bytes=b""
                ),
            )
        lifetime = 0
        if self.server.complete:
            lifetime = self._complete()
        return SaslAuthenticateResponse(
            error_code=0, error_message=None, auth_bytes=reply, session_lifetime_ms=lifetime
        )

    def raw_token(self, frame: bytes) -> bytes:
        """SaslHandshake v0: a raw token in, a size-prefixed raw token out."""
        try:
            reply = self._step(frame)
        except scram.ScramError as exc:
            self._fail(exc.client_message or str(exc))
        if self.server.complete:
            self._complete()
        return len(reply).to_bytes(4, "big") + reply

    def _complete(self) -> int:
        """Authenticated: the principal, and the session lifetime told to the client
        (ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs: connections.max.reauth.ms,
        a delegation token's expiry, the sooner of both; 0: none)."""
        server = self.server
        principal = f"User:{getattr(server, 'authorization_id', None) or server.username}"
        if self.reauthenticating and principal != self.principal:
            self._fail(
                f"Cannot change principals during re-authentication from {self.principal}: {principal}"
            )
        self.principal = principal
        self.conn.principal = principal
        self.conn.token_authenticated = getattr(server, "token_authenticated", False)
        self.state = "done"
        self.reauthenticating = False
        credential_expiry = getattr(server, "token_expiry_ms", None)
        reauth = self.settings.reauth_ms
        if credential_expiry is None and reauth <= 0:
            self.expiry = None
            return 0
        lifetimes = [reauth] if reauth > 0 else []
        if credential_expiry is not None:
            lifetimes.append(credential_expiry - int(time.time() * 1000))
        lifetime = max(0, min(lifetimes))
        self.expiry = time.monotonic() + lifetime / 1000.0
        return lifetime


# ---------------------------------------------------------------------- handlers (Kafka's KafkaApis)
def handle_sasl_handshake(ctx, req):
    """Outside an authentication (a non-SASL listener, or after it): KafkaApis answers ILLEGAL_SASL_STATE."""
    from kafkatool.protocol.generated.sasl_handshake_response import SaslHandshakeResponse

    return SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE, mechanisms=[])


def handle_sasl_authenticate(ctx, req):
    from kafkatool.protocol.generated.sasl_authenticate_response import SaslAuthenticateResponse

    return SaslAuthenticateResponse(
        error_code=ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
    )


def register(router) -> None:
    router.register(SASL_HANDSHAKE, 0, 1, handle_sasl_handshake)
    router.register(SASL_AUTHENTICATE, 0, 2, handle_sasl_authenticate)
