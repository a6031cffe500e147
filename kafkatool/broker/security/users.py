"""DescribeUserScramCredentials / AlterUserScramCredentials on the credentials the broker stores.

Kafka's rules (ControllerApis / ZkAdminManager): a user named twice in one request is
DUPLICATE_RESOURCE for each of its entries; an unknown mechanism is
UNSUPPORTED_SASL_MECHANISM; iterations outside [4096, 16384] is
UNACCEPTABLE_CREDENTIAL; deleting what does not exist is RESOURCE_NOT_FOUND; Describe of
an unknown user is RESOURCE_NOT_FOUND ("Attempt to describe a user credential that does
not exist").  The salted password arrives already salted (the client never sends the
password): the broker keeps StoredKey/ServerKey from it, as Kafka does.
"""

from __future__ import annotations

import os
import re

from kafkatool.broker.security import scram
from kafkatool.errors import KafkatoolError

DESCRIBE = 50
ALTER = 51
NONE = 0
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93
UNSUPPORTED_SASL_MECHANISM = 33


def set_credential(store, user: str, mechanism: str, cred: scram.ScramCredential) -> None:
    store.user_scram.setdefault(user, {})[mechanism] = cred.to_text()


def delete_credential(store, user: str, mechanism: str) -> bool:
    creds = store.user_scram.get(user, {})
    if mechanism not in creds:
        return False
    del creds[mechanism]
    if not creds:
        store.user_scram.pop(user, None)
    return True


def describe(store, users: list[str] | None) -> list[tuple[str, int, str | None, list[tuple[int, int]]]]:
    """(user, error, message, [(mechanism code, iterations)]) per user; None: every user."""
    names = sorted(store.user_scram) if users is None else users
    out = []
    seen: dict[str, int] = {}
    for u in names:
        seen[u] = seen.get(u, 0) + 1
    for u in dict.fromkeys(names):
        if seen[u] > 1:
            out.append(
                (
                    u,
                    DUPLICATE_RESOURCE,
                    f"Cannot describe SCRAM credentials for the same user twice in a single request: {u}",
                    [],
                )
            )
            continue
        creds = store.user_scram.get(u)
        if not creds:
            out.append(
                (u, RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {u}", [])
            )
            continue
        infos = [
            (scram.CODE_OF[m], scram.ScramCredential.from_text(t).iterations)
            for m, t in sorted(creds.items())
            if m in scram.CODE_OF
        ]
        out.append((u, NONE, None, infos))
    return out


def alter(store, deletions, upsertions) -> list[tuple[str, int, str | None]]:
    """deletions: [(user, mech code)]; upsertions: [(user, mech code, iterations, salt, salted_password)]."""
    users = [d[0] for d in deletions] + [u[0] for u in upsertions]
    order = list(dict.fromkeys(users))
    errors: dict[str, tuple[int, str]] = {}
    pairs = [(d[0], d[1]) for d in deletions] + [(u[0], u[1]) for u in upsertions]
    for u, code in pairs:
        if pairs.count((u, code)) > 1 and u not in errors:
            errors[u] = (
                DUPLICATE_RESOURCE,
                f"A user credential cannot be altered twice in the same request: {u}",
            )
    for u, code in pairs:
        if u in errors:
            continue
        if not u:
            errors[u] = (UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif code not in scram.MECHANISM_CODES:
            errors[u] = (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    for u, code, iterations, _salt, salted in upsertions:
        if u in errors:
            continue
        mech = scram.MECHANISM_CODES[code]
        if iterations < scram.MECHANISMS[mech][1]:
            errors[u] = (UNACCEPTABLE_CREDENTIAL, f"Too few iterations: {iterations}")
        elif iterations > scram.MAX_ITERATIONS:
            errors[u] = (UNACCEPTABLE_CREDENTIAL, f"Too many iterations: {iterations}")
        elif not salted or not _salt:
            errors[u] = (UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
    for u, code in [(d[0], d[1]) for d in deletions]:
        if u in errors:
            continue
        if scram.MECHANISM_CODES[code] not in store.user_scram.get(u, {}):
            errors[u] = (RESOURCE_NOT_FOUND, f"Attempt to delete a user credential that does not exist: {u}")
    for u, code in [(d[0], d[1]) for d in deletions]:
        if u not in errors:
            delete_credential(store, u, scram.MECHANISM_CODES[code])
    for u, code, iterations, salt, salted in upsertions:
        if u not in errors:
            mech = scram.MECHANISM_CODES[code]
            set_credential(
                store, u, mech, scram.credential_from_salted(mech, bytes(salted), bytes(salt), iterations)
            )
    store.save()
    return [(u, *errors.get(u, (NONE, None))) for u in order]


def handle_describe(ctx, req):
    from kafkatool.protocol.generated import describe_user_scram_credentials_response as R

    names = None if req.users is None else [u.name for u in req.users]
    results = [
        R.DescribeUserScramCredentialsResult(
            user=u,
            error_code=err,
            error_message=msg,
            credential_infos=[R.CredentialInfo(mechanism=m, iterations=i) for m, i in infos],
        )
        for u, err, msg, infos in describe(ctx.broker.scram_store, names)
    ]
    return R.DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=0, error_message=None, results=results
    )


def handle_alter(ctx, req):
    from kafkatool.broker.processes import once_applied
    from kafkatool.protocol.generated import alter_user_scram_credentials_response as R

    out = alter(
        ctx.broker.scram_store,
        [(d.name, d.mechanism) for d in req.deletions],
        [(u.name, u.mechanism, u.iterations, u.salt, u.salted_password) for u in req.upsertions],
    )
    resp = R.AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[R.AlterUserScramCredentialsResult(user=u, error_code=e, error_message=m) for u, e, m in out],
    )
    return once_applied(ctx.broker, resp)


def register(router) -> None:
    router.register(DESCRIBE, 0, 0, handle_describe)
    router.register(ALTER, 0, 0, handle_alter)


# ---------------------------------------------------------------- the `kafkatool users` side

_SCRAM_ENTRY = re.compile(r"\s*(SCRAM-SHA-(?:256|512))\s*=\s*\[([^\]]*)\]\s*")


class UsersError(KafkatoolError):
    """A credential change or lookup that cannot be made (one line, exit 2)."""


def parse_add_config(text: str) -> list[tuple[str, str, int]]:
    """kafka-configs.sh's ``--add-config 'SCRAM-SHA-256=[iterations=8192,password=s],SCRAM-SHA-512=[password=s]'``
    -> [(mechanism, password, iterations)]; iterations default to 4096 as Kafka's tool does."""
    out = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _SCRAM_ENTRY.match(text, pos)
        if m is None:
            raise UsersError(
                f"--add-config: expected SCRAM-SHA-256=[...] or SCRAM-SHA-512=[...] at {text[pos:]!r}"
            )
        fields = {}
        for item in filter(None, (x.strip() for x in m.group(2).split(","))):
            k, sep, v = item.partition("=")
            if not sep:
                raise UsersError(f"--add-config: {item!r} is not key=value")
            fields[k.strip()] = v
        if "password" not in fields:
            raise UsersError(f"--add-config: {m.group(1)} needs password=...")
        try:
            iterations = int(fields.get("iterations", scram.MECHANISMS[m.group(1)][1]))
        except ValueError:
            raise UsersError(
                f"--add-config: iterations must be a number, not {fields['iterations']!r}"
            ) from None
        out.append((m.group(1), fields["password"], iterations))
        pos = m.end()
        if pos < len(text):
            if text[pos] != ",":
                raise UsersError(f"--add-config: expected ',' at {text[pos:]!r}")
            pos += 1
    return out


def parse_delete_config(text: str) -> list[str]:
    mechs = [x.strip() for x in text.split(",") if x.strip()]
    for m in mechs:
        if m not in scram.CODE_OF:
            raise UsersError(
                f"--delete-config: unknown SCRAM mechanism {m!r} (SCRAM-SHA-256 or SCRAM-SHA-512)"
            )
    return mechs


def _salted(mech: str, password: str, iterations: int) -> tuple[bytes, bytes]:
    salt = os.urandom(32)
    return salt, scram.salted_password(mech, password, salt, iterations)


def describe_live(admin, users: list[str] | None) -> list[tuple[str, int, str | None, list[tuple[int, int]]]]:
    """DescribeUserScramCredentials through a cluster (the same tuples as :func:`describe`)."""
    from kafkatool.protocol.generated import DescribeUserScramCredentialsRequest
    from kafkatool.protocol.generated.describe_user_scram_credentials_request import UserName

    req = DescribeUserScramCredentialsRequest(
        users=None if users is None else [UserName(name=u) for u in users]
    )
    resp = admin.request(DESCRIBE, req)
    if resp.error_code:
        raise UsersError(f"DescribeUserScramCredentials: error {resp.error_code}: {resp.error_message}")
    return [
        (r.user, r.error_code, r.error_message, [(c.mechanism, c.iterations) for c in r.credential_infos])
        for r in resp.results
    ]


def alter_live(
    admin, user: str, add: list[tuple[str, str, int]], delete: list[str]
) -> list[tuple[str, int, str | None]]:
    """AlterUserScramCredentials through a cluster: the password is salted here, as Kafka's
    admin client does; only the salted password travels."""
    from kafkatool.protocol.generated import AlterUserScramCredentialsRequest
    from kafkatool.protocol.generated.alter_user_scram_credentials_request import (
        ScramCredentialDeletion,
        ScramCredentialUpsertion,
    )

    ups = []
    for mech, password, iterations in add:
        salt, salted = _salted(mech, password, iterations)
        ups.append(
            ScramCredentialUpsertion(
                name=user,
                mechanism=scram.CODE_OF[mech],
                iterations=iterations,
                salt=salt,
                salted_password=salted,
            )
        )
    dels = [ScramCredentialDeletion(name=user, mechanism=scram.CODE_OF[m]) for m in delete]
    resp = admin.request(ALTER, AlterUserScramCredentialsRequest(deletions=dels, upsertions=ups))
    return [(r.user, r.error_code, r.error_message) for r in resp.results]


def alter_offline(
    store, user: str, add: list[tuple[str, str, int]], delete: list[str]
) -> list[tuple[str, int, str | None]]:
    """The same change on the embedded metadata of a stopped broker's log dir (the store is
    saved when ``store.writable``), by the broker's own rules (:func:`alter`)."""
    ups = []
    for mech, password, iterations in add:
        salt, salted = _salted(mech, password, iterations)
        ups.append((user, scram.CODE_OF[mech], iterations, salt, salted))
    return alter(store, [(user, scram.CODE_OF[m]) for m in delete], ups)
