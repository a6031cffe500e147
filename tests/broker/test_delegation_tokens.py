"""Delegation tokens (KIP-48) in ``kafkatool serve`` and ``kafkatool delegation-tokens``: create,
renew, expire and describe through the CLI against a real broker with a SASL_PLAINTEXT SCRAM
listener and ACLs; a token login through the project's SCRAM client with ``tokenauth=true``
(kafka-python 3.0's SCRAM client sends no extension and librdkafka has no token login, so
neither can log in with a token); Kafka's rules and messages; a token that survives a restart.
The HMAC and the znode bytes are checked against values a JDK and Scala 2.13 + Jackson made."""

from __future__ import annotations

import base64
import json
import time

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.protocol.apis import API_BY_KEY
from tests.broker.conftest import BrokerProcess, free_port

runner = CliRunner()
SECRET = "s3cr3t-ké"
USERS = ("alice", "bob", "dave")
INVALID = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
)


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _props(path, user: str, password: str, *, token: bool = False, mech: str = "SCRAM-SHA-256"):
    extra = ' tokenauth="true"' if token else ""
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism={mech}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}"{extra};\n'
    )
    return path


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("dtok")
    plain, sasl = free_port(), free_port()
    opts = [
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
        f"delegation.token.master.key={SECRET}",  # the legacy name still works
        "delegation.token.expiry.check.interval.ms=200",
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "super.users=User:ANONYMOUS",  # the PLAINTEXT listener: the test's own admin
        "num.partitions=1",
    ]
    b = BrokerProcess(d / "data", port=plain, extra=opts).start()
    b.sasl = f"127.0.0.1:{sasl}"
    b.dir = d
    for u in USERS:
        add = f"SCRAM-SHA-256=[password={u}-secret],SCRAM-SHA-512=[password={u}-secret]"
        res = run("users", "alter", "--bootstrap-server", b.bootstrap, "--user", u, "--add-config", add)
        assert res.exit_code == 0, res.output
    b.props = {u: _props(d / f"{u}.properties", u, f"{u}-secret") for u in USERS}
    try:
        yield b
    finally:
        b.stop()


def dt(b, who, *args):
    """kafkatool delegation-tokens as ``who`` (a user name, or a properties file)."""
    props = b.props[who] if isinstance(who, str) else who
    return run("delegation-tokens", "--bootstrap-server", b.sasl, "--command-config", props, *args)


def create(b, who, *args) -> dict:
    res = dt(b, who, "--create", "--json", *args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def described(b, who, *args) -> dict[str, dict]:
    res = dt(b, who, "--describe", "--json", *args)
    assert res.exit_code == 0, res.output
    return {t["token_id"]: t for t in map(json.loads, res.stdout.splitlines())}


def token_props(b, tok: dict, name: str, mech: str = "SCRAM-SHA-256"):
    return _props(b.dir / f"{name}.properties", tok["token_id"], tok["hmac"], token=True, mech=mech)


def token_login(b, props) -> str | None:
    """A Metadata request through the project's client with ``props``' login: None when it is
    answered, else the error."""
    from kafkatool.assign import kafka_client
    from kafkatool.broker.security.client import ClientSecurity
    from kafkatool.errors import KafkatoolError

    kafka_client.use_client_security(ClientSecurity.from_file(props))
    try:
        with kafka_client.KafkaAdmin(b.sasl, timeout=10) as admin:
            admin.metadata()
        return None
    except KafkatoolError as exc:
        return str(exc)
    finally:
        kafka_client.use_client_security(None)


def test_hmac_is_kafkas_hmacsha512():
    from kafkatool.broker.security.tokens import create_hmac

    # javax.crypto.Mac HmacSHA512, SecretKeySpec(SECRET's UTF-8 bytes), on OpenJDK 17
    want = "UzSv8XeEFpTBNMspJLigVdjKuSdIUngU/ju972lBkyy/WhTAVBgwLHprtvisRnyZZ5klRVc2d7h1iR5TFnqH9g=="
    assert base64.b64encode(create_hmac("noJsaJ6kRKK4ZMgiLR79Lw", SECRET)).decode() == want


def test_token_znode_bytes_are_kafkas():
    from kafkatool.zk import codecs

    info = codecs.DelegationTokenInfo(
        "AbC-_x",
        "User:alice b~*",
        "User:admin",
        ["User:bob", "User:ca rol"],
        1700000000123,
        1700604800123,
        1700086400123,
    )
    # DelegationTokenInfoZNode.encode as Kafka runs it: Scala 2.13's HashMap of
    # toJsonCompatibleMap through Jackson, principals through Sanitizer.sanitize
    java = (
        b'{"issueTimestamp":1700000000123,"renewers":["User%3Abob","User%3Aca%20rol"],'
        b'"tokenRequester":"User%3Aadmin","tokenId":"AbC-_x","owner":"User%3Aalice%20b%7E%2A",'
        b'"expiryTimestamp":1700086400123,"maxTimestamp":1700604800123,"version":3}'
    )
    assert codecs.encode_delegation_token(info) == java
    assert codecs.decode_delegation_token(java) == info
    v1 = json.loads(java)
    del v1["tokenRequester"]
    v1["version"] = 1
    assert codecs.decode_delegation_token(json.dumps(v1).encode()).token_requester == "User:alice b~*"
    bad = codecs.decode_path("/delegation_token/tokens/x", java.replace(b'"version":3', b'"version":4'))
    assert not bad.ok and "version 4" in bad.error


def test_create_login_renew_expire(broker):
    b = broker
    res = dt(b, "alice", "--create", "--renewer-principal", "User:bob")
    assert res.exit_code == 0, res.output
    lines = res.stdout.split("\n")
    assert lines[0] == "Calling create token operation with renewers :[User:bob] , max-life-time-period :-1"
    assert lines[1].startswith("Created delegation token with tokenId : ")
    token_id = lines[1].rsplit(" ", 1)[1]
    assert lines[2] == ""
    assert lines[3] == (
        "TOKENID         HMAC                           OWNER           REQUESTER       RENEWERS"
        "                  ISSUEDATE       EXPIRYDATE      MAXDATE        "
    )
    assert (
        lines[4] == ""
        and lines[5].startswith(f"{token_id} ")
        and "User:alice      User:alice      [User:bob]" in lines[5]
    )
    tok = described(b, "alice")[token_id]
    assert (
        tok["owner"] == "User:alice" and tok["requester"] == "User:alice" and tok["renewers"] == ["User:bob"]
    )
    day, week = 24 * 3600 * 1000, 7 * 24 * 3600 * 1000
    assert tok["expiry_timestamp"] - tok["issue_timestamp"] == day
    assert tok["max_timestamp"] - tok["issue_timestamp"] == week

    # a token login (tokenauth=true), with either mechanism: the principal is the owner
    props = token_props(b, tok, "tok1")
    assert token_login(b, props) is None
    assert token_login(b, token_props(b, tok, "tok1-512", "SCRAM-SHA-512")) is None
    # a token cannot manage tokens; neither can PLAINTEXT
    refused = dt(b, props, "--describe")
    assert refused.exit_code == 1
    assert (
        "org.apache.kafka.common.errors.UnsupportedByAuthenticationException: Delegation Token requests are not "
        "allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels."
    ) in refused.stderr
    plain = run(
        "delegation-tokens",
        "--bootstrap-server",
        b.bootstrap,
        "--command-config",
        b.dir / "none.properties",
        "--describe",
    )
    assert plain.exit_code == 2  # the file does not exist: a usage error
    (b.dir / "none.properties").write_text("security.protocol=PLAINTEXT\n")
    plain = run(
        "delegation-tokens",
        "--bootstrap-server",
        b.bootstrap,
        "--command-config",
        b.dir / "none.properties",
        "--create",
    )
    assert plain.exit_code == 1 and "UnsupportedByAuthenticationException" in plain.stderr
    # the HMAC of a token id is the password, the id the user: a wrong HMAC is refused
    wrong = dict(tok, hmac=base64.b64encode(b"x" * 64).decode())
    assert INVALID in token_login(b, token_props(b, wrong, "wrong"))

    # renew: the renewer may, another principal may not
    res = dt(b, "bob", "--renew", "--hmac", tok["hmac"], "--renew-time-period", 3_600_000)
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(
        f"Calling renew token operation with hmac :{tok['hmac']} , renew-time-period :3600000\n"
    )
    assert "\nCompleted renew operation. New expiry date : " in res.stdout and not res.stdout.endswith("\n")
    renewed = described(b, "bob")[token_id]
    assert 3_590_000 < renewed["expiry_timestamp"] - time.time() * 1000 <= 3_600_000
    res = dt(b, "dave", "--renew", "--hmac", tok["hmac"])
    assert res.exit_code == 1
    assert (
        "org.apache.kafka.common.errors.DelegationTokenOwnerMismatchException: Specified Principal is not valid "
        "Owner/Renewer." in res.stderr
    )
    # an unknown HMAC
    res = dt(b, "alice", "--renew", "--hmac", base64.b64encode(b"nope").decode())
    assert (
        res.exit_code == 1
        and "DelegationTokenNotFoundException: Delegation Token is not found on server." in res.stderr
    )

    # expire at once (-1): gone, and its login fails with Kafka's message
    res = dt(b, "alice", "--expire", "--hmac", tok["hmac"])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(
        f"Calling expire token operation with hmac :{tok['hmac']} , expire-time-period :-1\n"
    )
    assert token_id not in described(b, "alice")
    assert INVALID in token_login(b, props)


def test_expired_token_is_removed_by_the_check(broker):
    b = broker
    tok = create(b, "alice", "--max-life-time-period", 2500)
    assert tok["max_timestamp"] - tok["issue_timestamp"] == 2500
    assert tok["expiry_timestamp"] == tok["max_timestamp"]  # min(max, issue + expiry.time.ms)
    props = token_props(b, tok, "short")
    assert token_login(b, props) is None
    # the session ends with the token (ReauthInfo: the credential's expiry, sent to the client)
    from kafkatool.broker.security.client import ClientSecurity
    from tests.broker.wire import WireClient

    with WireClient(b.sasl) as w:
        steps = ClientSecurity.from_file(props).sasl_exchange()
        api_key, version, body = next(steps)
        try:
            while True:
                last = w.request(api_key, version, body)
                api_key, version, body = steps.send(last)
        except StopIteration:
            pass
        assert 0 < last.session_lifetime_ms <= tok["expiry_timestamp"] - time.time() * 1000 + 50
        # once it ends, the broker closes the connection at the next request
        time.sleep(max(0.0, (tok["expiry_timestamp"] - time.time() * 1000) / 1000) + 0.1)
        w.send(18, 3, API_BY_KEY[18].request(client_software_name="wire", client_software_version="1.0"))
        assert w.closed_by_peer()
    deadline = time.monotonic() + 10
    while tok["token_id"] in described(b, "alice") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert tok["token_id"] not in described(b, "alice")
    assert "Delegation token expired for token: " + tok["token_id"] in b.log_text()
    assert INVALID in token_login(b, props)
    res = dt(b, "alice", "--renew", "--hmac", tok["hmac"])
    assert res.exit_code == 1 and "DelegationTokenNotFoundException" in res.stderr


def test_owner_and_describe_acls(broker):
    b = broker
    # creating for another principal needs CREATE_TOKENS on that user
    res = dt(b, "alice", "--create", "--owner-principal", "User:bob")
    assert res.exit_code == 1
    assert "DelegationTokenAuthorizationException: Delegation Token authorization failed." in res.stderr
    res = dt(b, "alice", "--create", "--renewer-principal", "Group:x")
    assert (
        res.exit_code == 1
        and "InvalidPrincipalTypeException: Supplied principalType is not supported." in res.stderr
    )
    bad = dt(b, "alice", "--create", "--renewer-principal", "nocolon")
    assert (
        bad.exit_code == 2
        and "expected a string in format principalType:principalName but got nocolon" in bad.output
    )
    # kafka-acls.sh's --user-principal resources: CREATE_TOKENS for alice on bob, DESCRIBE_TOKENS
    # for dave on alice (the PLAINTEXT listener's ANONYMOUS is a super user)
    for user, who, op in (
        ("User:bob", "User:alice", "CreateTokens"),
        ("User:alice", "User:dave", "DescribeTokens"),
    ):
        res = run(
            "acls", "--add", "--bootstrap-server", b.bootstrap, "--user-principal", user,
            "--allow-principal", who, "--operation", op,
        )  # fmt: skip
        assert res.exit_code == 0, res.output
        assert f"resourceType=USER, name={user}, patternType=LITERAL" in res.output
    listed = run(
        "acls", "--list", "--bootstrap-server", b.bootstrap, "--user-principal", "User:bob", "--json"
    )
    assert [json.loads(x)["operation"] for x in listed.stdout.splitlines()] == ["CREATE_TOKENS"]
    wrong = run(
        "acls", "--add", "--bootstrap-server", b.bootstrap, "--user-principal", "User:bob",
        "--allow-principal", "User:x", "--operation", "Read",
    )  # fmt: skip
    assert (
        wrong.exit_code == 1
        and "ACL binding contains invalid operation READ for resource type USER" in wrong.output
    )
    for_bob = create(b, "alice", "--owner-principal", "User:bob")
    assert for_bob["owner"] == "User:bob" and for_bob["requester"] == "User:alice"
    own = create(b, "alice")
    # the owner and the requester see a token; DESCRIBE_TOKENS on alice lets dave see hers
    assert {for_bob["token_id"], own["token_id"]} <= set(described(b, "alice"))
    assert for_bob["token_id"] in described(b, "bob") and own["token_id"] not in described(b, "bob")
    dave = described(b, "dave")
    assert own["token_id"] in dave and for_bob["token_id"] not in dave
    # --owner-principal filters by owner or renewer
    assert set(described(b, "alice", "--owner-principal", "User:bob")) == {for_bob["token_id"]}
    # the token of bob logs in as bob
    assert token_login(b, token_props(b, for_bob, "forbob")) is None
    # the CLI's own checks, in Kafka's words
    one = dt(b, "alice", "--create", "--describe")
    assert one.exit_code == 2 and "exactly one action" in one.output
    mixed = dt(b, "alice", "--describe", "--hmac", "x")
    assert mixed.exit_code == 2 and 'Option "[describe]" can\'t be used with option "[hmac]"' in mixed.output


def test_an_owner_name_without_a_type_is_kafkas_unknown_server_error(broker):
    """CreateDelegationToken v3 with an owner name and a null owner type: KafkaApis builds the
    owner as new KafkaPrincipal(null, name), whose constructor throws (NullPointerException),
    so handleError answers CreateDelegationTokenRequest.getErrorResponse: UNKNOWN_SERVER_ERROR,
    owner and requester ANONYMOUS, and no token is made; on PLAINTEXT as on a SASL login.  The
    handler answered the null type, which the response cannot carry (the connection was
    closed)."""
    from kafkatool.broker.security.client import ClientSecurity
    from kafkatool.protocol import generated as G
    from tests.broker.wire import WireClient

    b = broker
    before = set(described(b, "alice"))
    req = G.CreateDelegationTokenRequest(
        owner_principal_type=None, owner_principal_name="alice", renewers=[], max_lifetime_ms=-1
    )
    with WireClient(b.bootstrap) as plain, WireClient(b.sasl) as alice:
        steps = ClientSecurity.from_file(b.props["alice"]).sasl_exchange()
        api_key, version, body = next(steps)
        try:
            while True:
                api_key, version, body = steps.send(alice.request(api_key, version, body))
        except StopIteration:
            pass
        for w in (plain, alice):
            r = w.request(38, 3, req)
            assert (r.error_code, r.principal_type, r.principal_name) == (-1, "User", "ANONYMOUS")
            assert (r.token_requester_principal_type, r.token_requester_principal_name) == (
                "User",
                "ANONYMOUS",
            )
            assert (r.token_id, r.hmac, r.issue_timestamp_ms, r.max_timestamp_ms) == ("", b"", -1, -1)
            assert w.api_versions().error_code == 0  # the connection stays
    assert set(described(b, "alice")) == before


def test_disabled_without_a_key(tmp_path):
    plain, sasl = free_port(), free_port()
    opts = [
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms=SCRAM-SHA-256",
    ]
    b = BrokerProcess(tmp_path / "data", port=plain, extra=opts).start()
    try:
        add = "SCRAM-SHA-256=[password=alice-secret]"
        assert (
            run(
                "users", "alter", "--bootstrap-server", b.bootstrap, "--user", "alice", "--add-config", add
            ).exit_code
            == 0
        )
        props = _props(tmp_path / "alice.properties", "alice", "alice-secret")
        res = run(
            "delegation-tokens",
            "--bootstrap-server",
            f"127.0.0.1:{sasl}",
            "--command-config",
            props,
            "--create",
        )
        assert res.exit_code == 1
        assert "DelegationTokenDisabledException: Delegation Token feature is not enabled." in res.stderr
    finally:
        b.stop()


def test_token_survives_a_restart(broker):
    b = broker
    tok = create(b, "alice", "--renewer-principal", "User:bob")
    stored = json.loads((b.data_dir / "kafkatool-cluster.json").read_text())["delegation_tokens"][
        tok["token_id"]
    ]
    assert stored["owner"] == "User%3Aalice" and "hmac" not in json.dumps(stored)  # the znode's JSON, no HMAC
    b.stop()
    # a stored token that does not decode is one log line, not a failed start
    path = b.data_dir / "kafkatool-cluster.json"
    meta = json.loads(path.read_text())
    meta["delegation_tokens"]["broken"] = dict(stored, owner="User%zz", tokenId="broken")
    path.write_text(json.dumps(meta))
    b.start()
    assert token_login(b, token_props(b, tok, "restarted")) is None
    assert token_login(b, token_props(b, tok, "restarted-again")) is None
    lines = [x for x in b.log_text().splitlines() if "Error while getting Token for tokenId: broken" in x]
    assert len(lines) == 1 and "Illegal hex characters" in lines[0], lines
    again = described(b, "bob")[tok["token_id"]]
    assert again == tok
