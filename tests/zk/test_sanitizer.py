"""Kafka's Sanitizer and the ``/config`` entity paths built with it: user principals and client
ids sanitized, ``<default>`` literal, the other entity types as they are."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from kafkatool.zk import paths
from kafkatool.zk.sanitizer import desanitize, sanitize

# Sanitizer.sanitize of each (URLEncoder.encode(name, "UTF-8"), then * -> %2A, + -> %20)
CASES = [
    ("alice", "alice"),
    ("alice@EXAMPLE.COM", "alice%40EXAMPLE.COM"),
    ("svc*", "svc%2A"),
    ("svc ops", "svc%20ops"),
    ("a+b", "a%2Bb"),
    ("100%", "100%25"),
    ("Zoë-ü_1.x", "Zo%C3%AB-%C3%BC_1.x"),
    ("用户", "%E7%94%A8%E6%88%B7"),
    ("😀", "%F0%9F%98%80"),
    ("CN=app,OU=ops/eu", "CN%3Dapp%2COU%3Dops%2Feu"),
    ("x~y", "x%7Ey"),
    ("<default>", "%3Cdefault%3E"),
]


@pytest.mark.parametrize(("name", "znode"), CASES)
def test_sanitize_is_kafkas(name, znode):
    assert sanitize(name) == znode
    assert desanitize(znode) == name


def test_desanitize_is_urldecoder():
    assert desanitize("a+b") == "a b"  # URLDecoder: + is a space (Kafka never writes one)
    assert desanitize("alice@EXAMPLE.COM") == "alice@EXAMPLE.COM"  # a raw name reads as itself
    assert desanitize("svc*") == "svc*"
    assert desanitize("%c3%a9") == "é"  # lower-case hex
    assert desanitize("%FF%41") == "\ufffdA"  # new String(bytes, UTF_8): U+FFFD, never refused
    for bad, words in [
        ("100%", "Incomplete trailing escape"),
        ("a%4", "Incomplete trailing escape"),
        ("%zz", "Illegal hex characters"),
        ("%-1", "negative value"),
    ]:
        with pytest.raises(ValueError, match=words):
            desanitize(bad)


def test_entity_paths():
    assert paths.entity_path("users", "alice@EXAMPLE.COM") == "users/alice%40EXAMPLE.COM"
    assert (
        paths.entity_path("users", "alice@EXAMPLE.COM", "app 1")
        == "users/alice%40EXAMPLE.COM/clients/app%201"
    )
    assert paths.entity_path("users", paths.DEFAULT, paths.DEFAULT) == "users/<default>/clients/<default>"
    # a user or client id named <default> is a name: Sanitizer's, never the default entity's znode
    assert paths.entity_path("users", "<default>", "<default>") == "users/%3Cdefault%3E/clients/%3Cdefault%3E"
    assert paths.entity_path("clients", "svc*") == "clients/svc%2A"
    assert paths.entity_path("clients", paths.DEFAULT) == "clients/<default>"
    # topics, brokers and ips keep their names (Kafka sanitizes only users and clients)
    assert paths.entity_path("topics", "a+b") == "topics/a+b"
    assert paths.entity_path("brokers", "<default>") == "brokers/<default>"
    assert paths.config_entity("users", "a b", "c*") == "/config/users/a%20b/clients/c%2A"
    with pytest.raises(ValueError):
        paths.entity_path("clients", "c", "x")


def test_parse_entity_path():
    assert paths.parse_entity_path("users/alice%40EXAMPLE.COM") == ("users", "alice@EXAMPLE.COM", None)
    assert paths.parse_entity_path("users/svc%2A/clients/app%201") == ("users", "svc*", "app 1")
    assert paths.parse_entity_path("users/<default>/clients/<default>") == (
        "users",
        paths.DEFAULT,
        paths.DEFAULT,
    )
    assert paths.parse_entity_path("users/%3Cdefault%3E") == ("users", "<default>", None)
    assert paths.parse_entity_path("clients/%E7%94%A8") == ("clients", "用", None)
    assert paths.parse_entity_path("topics/a+b") == ("topics", "a+b", None)
    for bad in ("users", "users/", "users/a/b", "users/a/clients/b/c", "users/100%"):
        with pytest.raises(ValueError):
            paths.parse_entity_path(bad)


_ORACLE = """
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

public class San {
    public static void main(String[] a) throws Exception {
        java.io.BufferedReader in = new java.io.BufferedReader(
            new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ", 2);
            String s = new String(HexFormat.of().parseHex(f[1]), StandardCharsets.UTF_8);
            String r;
            if (f[0].equals("S")) {
                // org.apache.kafka.common.utils.Sanitizer.sanitize's steps
                r = URLEncoder.encode(s, "UTF-8").replace("*", "%2A").replace("+", "%20");
            } else {
                try { r = URLDecoder.decode(s, "UTF-8"); } catch (IllegalArgumentException e) { r = "!"; }
            }
            out.append(HexFormat.of().formatHex(r.getBytes(StandardCharsets.UTF_8))).append('\\n');
        }
        System.out.print(out);
    }
}
"""


@pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK on this machine")
def test_random_names_against_the_jdk(tmp_path):
    """2,000 random names through Sanitizer's steps on the JDK and through sanitize, and 2,000
    random escape strings through URLDecoder and desanitize (a refusal on both sides alike)."""
    rng = random.Random(19)
    alphabet = "aZ09.-_*+ %@/~<>=,:é用😀"
    names = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10))) for _ in range(2_000)]
    escapes = [
        "".join(
            rng.choice(["%", "C3", "A9", "FF", "41", "E7", "+", "a", "-1", "z", "%2"])
            for _ in range(rng.randint(1, 6))
        )
        for _ in range(2_000)
    ]
    (tmp_path / "San.java").write_text(_ORACLE)
    subprocess.run(["javac", "San.java"], cwd=tmp_path, check=True, timeout=120)
    lines = [f"S {n.encode().hex()}" for n in names] + [f"D {e.encode().hex()}" for e in escapes]
    out = subprocess.run(
        ["java", "-cp", str(tmp_path), "San"],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.splitlines()
    assert len(out) == len(lines)

    def ours(kind: str, text: str) -> str:
        if kind == "S":
            return sanitize(text)
        try:
            return desanitize(text)
        except ValueError:
            return "!"

    wrong = [
        (line, want)
        for line, want in zip(lines, out, strict=True)
        if ours(line[0], bytes.fromhex(line[2:]).decode()).encode().hex() != want
    ]
    assert not wrong, wrong[:5]


def test_entity_configs_in_zookeeper_by_real_names(zk_chroot):
    """zk/client's entity-config functions, the one boundary: real names in, real names out, the
    znodes and notifications at Kafka's sanitized paths (a real ZooKeeper)."""
    from kafkatool.zk import codecs
    from kafkatool.zk.client import KafkaZk

    hosts, chroot = zk_chroot.split("/", 1)
    with KafkaZk(hosts) as root:
        for p in ("config/changes", "brokers/ids", "brokers/topics"):  # a Kafka root
            root.ensure_path(f"/{chroot}/{p}")
    with KafkaZk(zk_chroot) as zk:
        zk.change_entity_config("users", "alice@EXAMPLE.COM", set_keys={"SCRAM-SHA-256": "cred"})
        zk.change_entity_config("users", "svc*", client="app 1", set_keys={"producer_byte_rate": "1024"})
        zk.change_entity_config("clients", paths.DEFAULT, set_keys={"consumer_byte_rate": "2048"})
        zk.change_entity_config("clients", "用", set_keys={"request_percentage": "50"})
        assert zk.children("/config/users") == ["alice%40EXAMPLE.COM", "svc%2A"]
        assert zk.children("/config/users/svc%2A/clients") == ["app%201"]
        assert zk.children("/config/clients") == ["%E7%94%A8", "<default>"]
        # ConfigEntityZNode's bytes and the notifications' entity paths, as AdminZkClient writes them
        assert (
            zk.get("/config/users/alice%40EXAMPLE.COM").data
            == b'{"version":1,"config":{"SCRAM-SHA-256":"cred"}}'
        )
        changes = [
            codecs.decode_config_change(zk.get(f"/config/changes/{c}").data)
            for c in zk.children("/config/changes")
        ]
        assert [c.entity_path for c in changes] == [
            "users/alice%40EXAMPLE.COM",
            "users/svc%2A/clients/app%201",
            "clients/<default>",
            "clients/%E7%94%A8",
        ]
        assert zk.get("/config/changes/" + zk.children("/config/changes")[0]).data == (
            b'{"version":2,"entity_path":"users/alice%40EXAMPLE.COM"}'
        )
        # a znode Kafka's tools could not have written: named, not a traceback
        zk.create("/config/users/100%", codecs.encode_entity_config({"SCRAM-SHA-256": "x"}))
        users = {(e.name, e.client): e for e in zk.entity_configs("users")}
        assert set(users) == {("alice@EXAMPLE.COM", None), ("svc*", None), ("svc*", "app 1"), ("100%", None)}
        assert users[("svc*", "app 1")].config.config == {"producer_byte_rate": "1024"}
        assert users[("svc*", "app 1")].entity_path == "users/svc%2A/clients/app%201"
        assert users[("svc*", "app 1")].label == "users/svc*/clients/app 1"
        assert (
            users[("100%", None)].config is None
            and "Incomplete trailing escape" in users[("100%", None)].error
        )
        assert {e.name for e in zk.entity_configs("clients")} == {paths.DEFAULT, "用"}
        assert zk.entity_config("users", "alice@EXAMPLE.COM").config.config == {"SCRAM-SHA-256": "cred"}
        assert zk.entity_config("users", "alice@example.com") is None

    # `zk get` shows the znode at its path and the entity by its real names; `zk configs` too
    from tests.zk.clirun import run

    [o] = run("get", "/config/users/svc%2A/clients/app%201", "-z", zk_chroot, "--json").json_lines()
    assert o["path"] == "/config/users/svc%2A/clients/app%201"
    assert o["entity"] == {"entity_type": "users", "name": "svc*", "client": "app 1"}
    text = run("get", "/config/users/alice%40EXAMPLE.COM", "-z", zk_chroot).stdout
    assert "/config/users/alice%40EXAMPLE.COM" in text and "entity: users/alice@EXAMPLE.COM" in text
    [change] = run("get", "/config/changes/config_change_0000000000", "-z", zk_chroot, "--json").json_lines()
    assert change["entity"] == {"entity_type": "users", "name": "alice@EXAMPLE.COM"}
    rows = run("configs", "-z", zk_chroot, "--type", "users", "--json").json_lines()
    assert {(r["name"], r.get("client"), r["path"]) for r in rows if "error" not in r} == {
        ("alice@EXAMPLE.COM", None, "/config/users/alice%40EXAMPLE.COM"),
        ("svc*", None, "/config/users/svc%2A"),
        ("svc*", "app 1", "/config/users/svc%2A/clients/app%201"),
    }
    assert [r["path"] for r in rows if "error" in r] == ["/config/users/100%"]
    assert "users/svc*/clients/app 1" in run("configs", "-z", zk_chroot, "--type", "users").stdout

    with KafkaZk(zk_chroot) as zk:
        # AdminZkClient.tryCleanQuotaNodes: emptied, a quota entity's znode goes (with the pair's
        # clients node and a user node left with nothing); a topic's stays as {}
        zk.change_entity_config("users", "svc*", client="app 1", delete_keys=["producer_byte_rate"])
        assert zk.children("/config/users") == ["100%", "alice%40EXAMPLE.COM"]
        zk.change_entity_config("users", "alice@EXAMPLE.COM", delete_keys=["SCRAM-SHA-256"])
        assert zk.children("/config/users") == ["100%"]
        zk.change_entity_config("topics", "t", set_keys={"retention.ms": "1"})
        zk.change_entity_config("topics", "t", delete_keys=["retention.ms"])
        assert zk.get("/config/topics/t").data == b'{"version":1,"config":{}}'
