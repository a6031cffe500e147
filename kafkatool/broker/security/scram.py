"""SCRAM-SHA-256/512 (RFC 5802/7677) with Kafka's ScramSaslServer semantics, and the credential codec.

Credentials are kept as Kafka keeps them: salt, StoredKey, ServerKey and iterations,
never the password; the text form ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=N``
is Kafka's ScramCredentialUtils format (the value under ``/config/users/<user>`` in
ZooKeeper mode, and what the embedded metadata stores).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from dataclasses import dataclass

from kafkatool.errors import KafkatoolError

#: mechanism -> (hashlib name, min iterations); Kafka's ScramMechanism
MECHANISMS = {"SCRAM-SHA-256": ("sha256", 4096), "SCRAM-SHA-512": ("sha512", 4096)}
MAX_ITERATIONS = 16384  # AlterUserScramCredentials refuses more (Kafka's ControllerApis check)
#: Kafka's Describe/AlterUserScramCredentials mechanism codes
MECHANISM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
CODE_OF = {v: k for k, v in MECHANISM_CODES.items()}


class ScramError(KafkatoolError):
    """An authentication failure; ``client_message`` is what Kafka tells the client."""

    def __init__(self, detail: str, client_message: str | None = None):
        super().__init__(detail)
        self.client_message = client_message


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        fields = dict(p.split("=", 1) for p in text.split(",") if "=" in p)
        try:
            return cls(
                base64.b64decode(fields["salt"]),
                base64.b64decode(fields["stored_key"]),
                base64.b64decode(fields["server_key"]),
                int(fields["iterations"]),
            )
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a SCRAM credential ({exc}): {text!r}") from None


def _hmac(algo: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, algo).digest()


def credential_from_salted(
    mechanism: str, salted_password: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    algo = MECHANISMS[mechanism][0]
    client_key = _hmac(algo, salted_password, b"Client Key")
    return ScramCredential(
        salt,
        hashlib.new(algo, client_key).digest(),
        _hmac(algo, salted_password, b"Server Key"),
        iterations,
    )


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism][0], password.encode(), salt, iterations)


def new_credential(
    mechanism: str, password: str, iterations: int = 4096, salt: bytes | None = None
) -> ScramCredential:
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted(
        mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations
    )


def _secure_random_string() -> str:
    # Kafka: new BigInteger(130, random).toString(36)
    n = int.from_bytes(os.urandom(17), "big") >> 6
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"


def sasl_name_to_username(name: str) -> str:
    if re.search(r"=(?!2C|3D)", name):
        raise ScramError(f"Invalid username: {name}")
    return name.replace("=2C", ",").replace("=3D", "=")


_CLIENT_FIRST = re.compile(
    r"n,(?:a=(?P<authzid>[^,]*))?,(?P<bare>n=(?P<name>[^,]*),r=(?P<nonce>[^,]*)(?:,(?P<ext>.*))?)"
)
_CLIENT_FINAL = re.compile(r"(?P<without>c=(?P<cb>[^,]*),r=(?P<nonce>[^,]*)(?P<ext>.*?)),p=(?P<proof>[^,]*)")

INVALID_CREDENTIALS = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
)


def scram_extensions(text: str) -> dict[str, str]:
    """ScramExtensions of a client-first message (``key=value`` after the nonce, comma-separated)."""
    out = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        out[key] = value
    return out


class ScramServer:
    """One SCRAM exchange on the broker: client-first -> server-first -> client-final -> server-final.

    With the extension ``tokenauth=true`` the user name is a delegation token's id, its
    credential the token's (``token_lookup``: (token id, mechanism) -> (credential, owner name,
    expiry timestamp) or None), and the session's principal the token's owner."""

    def __init__(self, mechanism: str, lookup, token_lookup=None):
        self.mechanism = mechanism
        self.algo = MECHANISMS[mechanism][0]
        self.lookup = lookup  # (username, mechanism) -> ScramCredential | None
        self.token_lookup = token_lookup
        self.state = "first"
        self.username: str | None = None
        #: ScramSaslServer.getAuthorizationID: the user, or the token's owner
        self.authorization_id: str | None = None
        self.token_authenticated = False
        #: the token's expiry timestamp (CREDENTIAL_LIFETIME_MS), None for a user's password
        self.token_expiry_ms: int | None = None
        self.complete = False

    def _fail(self, detail: str):
        # SaslException in ScramSaslServer: the client sees the generic invalid-credentials text
        raise ScramError(detail, INVALID_CREDENTIALS.format(self.mechanism))

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            self._fail("Invalid SCRAM message: not UTF-8")
        if self.state == "first":
            m = _CLIENT_FIRST.fullmatch(text)
            if m is None:
                self._fail(f"Invalid SCRAM client first message format: {text!r}")
            ext = scram_extensions(m.group("ext") or "")
            self.username = sasl_name_to_username(m.group("name"))
            # ScramExtensions.tokenAuthenticated: Boolean.parseBoolean of tokenauth
            if ext.get("tokenauth", "").lower() == "true":
                token = self.token_lookup(self.username, self.mechanism) if self.token_lookup else None
                if token is None:
                    self._fail(f"Token Authentication failed: Invalid tokenId : {self.username}")
                cred, self.authorization_id, self.token_expiry_ms = token
                self.token_authenticated = True
            else:
                cred = self.lookup(self.username, self.mechanism)
                self.authorization_id = self.username
            if cred is None:
                self._fail("Authentication failed: Invalid user credentials")
            authzid = m.group("authzid") or ""
            if authzid and authzid != self.username:
                raise ScramError(
                    "authorization id differs",
                    "Authentication failed: Client requested an authorization id that is different from username",
                )
            if cred.iterations < MECHANISMS[self.mechanism][1]:
                self._fail(
                    f"Iterations {cred.iterations} is less than the minimum {MECHANISMS[self.mechanism][1]}"
                )
            self.cred = cred
            self.client_first_bare = m.group("bare")
            nonce = m.group("nonce") + _secure_random_string()
            self.server_first = f"r={nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
            self.nonce = nonce
            self.state = "final"
            return self.server_first.encode()
        if self.state == "final":
            m = _CLIENT_FINAL.fullmatch(text)
            if m is None:
                self._fail(f"Invalid SCRAM client final message format: {text!r}")
            # Kafka checks endsWith, not equality (librdkafka repeats the client nonce in front)
            if not m.group("nonce").endswith(self.nonce):
                self._fail("Invalid client nonce in the final client message.")
            try:
                proof = base64.b64decode(m.group("proof"), validate=True)
            except ValueError:
                self._fail("Invalid client proof")
            auth_message = f"{self.client_first_bare},{self.server_first},{m.group('without')}".encode()
            signature = _hmac(self.algo, self.cred.stored_key, auth_message)
            if len(proof) != len(signature):
                self._fail("Invalid client credentials")
            client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
            if not hmac.compare_digest(hashlib.new(self.algo, client_key).digest(), self.cred.stored_key):
                self._fail("Invalid client credentials")
            server_sig = _hmac(self.algo, self.cred.server_key, auth_message)
            self.state = "done"
            self.complete = True
            return b"v=" + base64.b64encode(server_sig)
        self._fail("Unexpected SCRAM message after completion")
        raise AssertionError  # unreachable
