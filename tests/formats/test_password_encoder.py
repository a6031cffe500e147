"""Kafka's PasswordEncoder (formats/password_encoder): round trips, Kafka's refusals, and both
directions against the JDK's own PBKDF2 and AES (a Java program decodes what kafkatool encoded and
encodes what kafkatool decodes, with the parameters Kafka stores beside the password)."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess

import pytest

from kafkatool.formats import password_encoder as PE

PASSWORDS = ["x", "", "p\u00e4ssw\u00f6rd", "\U0001f511 key", "a" * 100]
CBC, GCM = "AES/CBC/PKCS5Padding", "AES/GCM/NoPadding"


def enc(password: str, secret: str = "s3cret", cipher: str = CBC, **kw) -> str:
    return PE.encode(
        password,
        secret,
        salt=os.urandom(PE.SALT_BYTES),
        iv=os.urandom(PE.iv_size(cipher)),
        cipher=cipher,
        **kw,
    )


def test_round_trip_and_what_is_stored():
    for cipher, key_length in ((CBC, 128), (CBC, 256), (GCM, 128)):
        for pw in PASSWORDS:
            stored = enc(pw, cipher=cipher, key_length=key_length, iterations=1000)
            assert PE.decode(stored, "s3cret") == pw
    stored = PE.parse(enc("\U0001f511", "k\u00e9y"))
    assert sorted(stored) == sorted(
        [
            "keyFactoryAlgorithm",
            "cipherAlgorithm",
            "keyLength",
            "salt",
            "iterations",
            "encryptedPassword",
            "passwordLength",
            "initializationVector",
        ]
    )
    assert (stored["keyFactoryAlgorithm"], stored["cipherAlgorithm"]) == ("PBKDF2WithHmacSHA512", CBC)
    assert (stored["keyLength"], stored["iterations"], stored["passwordLength"]) == ("128", "4096", "2")
    assert len(base64.b64decode(stored["salt"])) == 256
    assert len(base64.b64decode(stored["initializationVector"])) == 16
    assert PE.parse(enc("x", cipher=GCM))["authenticationTagLength"] == "128"
    # a new salt and IV each time: the same password never reads the same twice
    assert enc("x") != enc("x")


def test_a_wrong_secret_or_value_is_kafkas_error():
    stored = enc("password")
    with pytest.raises(PE.PasswordEncoderError, match="^Password could not be decoded$"):
        PE.decode(stored, "other")
    with pytest.raises(PE.PasswordEncoderError, match="^Password could not be decoded$"):
        PE.decode(enc("password", cipher=GCM), "other")
    longer = stored.replace("passwordLength:8", "passwordLength:9")
    with pytest.raises(PE.PasswordEncoderError, match="sanity check of length failed"):
        PE.decode(longer, "s3cret")
    for bad in (
        "plain",
        stored.replace("salt:", "pepper:"),
        stored.replace("iterations:4096", "iterations:x"),
    ):
        with pytest.raises(PE.PasswordEncoderError, match="not an encoded password"):
            PE.decode(bad, "s3cret")
    for kw, why in (
        ({"cipher": "DES/CBC/PKCS5Padding"}, "cipher algorithm"),
        ({"key_length": 100}, "key length"),
        ({"key_factory": "PBKDF2WithHmacMD5"}, "key factory"),
    ):
        with pytest.raises(PE.PasswordEncoderError, match=why):
            enc("x", **kw)


_JAVA = """
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.*;
import javax.crypto.*;
import javax.crypto.spec.*;

public class Pwd {
  static Base64.Decoder D = Base64.getDecoder();
  static Base64.Encoder E = Base64.getEncoder();

  static SecretKeySpec key(String secret, String factory, String cipher, int bits, byte[] salt, int n)
      throws Exception {
    byte[] k = SecretKeyFactory.getInstance(factory)
        .generateSecret(new PBEKeySpec(secret.toCharArray(), salt, n, bits)).getEncoded();
    return new SecretKeySpec(k, cipher.substring(0, cipher.indexOf('/')));
  }

  static String text(String b64) { return new String(D.decode(b64.substring(1)), StandardCharsets.UTF_8); }

  public static void main(String[] args) throws Exception {
    Scanner in = new Scanner(System.in);
    while (in.hasNextLine()) {
      String[] f = in.nextLine().split(" ");
      String secret = text(f[1]);
      if (f[0].equals("decode")) {
        Map<String, String> m = new HashMap<>();
        for (String kv : f[2].split(",")) m.put(kv.substring(0, kv.indexOf(':')), kv.substring(kv.indexOf(':') + 1));
        String c = m.get("cipherAlgorithm");
        byte[] iv = D.decode(m.get("initializationVector"));
        Cipher cipher = Cipher.getInstance(c);
        cipher.init(Cipher.DECRYPT_MODE,
            key(secret, m.get("keyFactoryAlgorithm"), c, Integer.parseInt(m.get("keyLength")),
                D.decode(m.get("salt")), Integer.parseInt(m.get("iterations"))),
            c.startsWith("AES/GCM/")
                ? new GCMParameterSpec(Integer.parseInt(m.get("authenticationTagLength")), iv)
                : new IvParameterSpec(iv));
        String p = new String(cipher.doFinal(D.decode(m.get("encryptedPassword"))), StandardCharsets.UTF_8);
        System.out.println("b" + E.encodeToString(p.getBytes(StandardCharsets.UTF_8)) + " "
            + (p.length() == Integer.parseInt(m.get("passwordLength"))));
      } else {
        String c = f[2];
        int bits = Integer.parseInt(f[3]), n = Integer.parseInt(f[4]);
        String p = text(f[5]);
        byte[] salt = new byte[256];
        new SecureRandom().nextBytes(salt);
        Cipher cipher = Cipher.getInstance(c);
        cipher.init(Cipher.ENCRYPT_MODE, key(secret, "PBKDF2WithHmacSHA512", c, bits, salt, n));
        String out = "keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:" + c + ",keyLength:" + bits
            + ",salt:" + E.encodeToString(salt) + ",iterations:" + n
            + ",encryptedPassword:" + E.encodeToString(cipher.doFinal(p.getBytes(StandardCharsets.UTF_8)))
            + ",passwordLength:" + p.length();
        if (c.startsWith("AES/GCM/")) {
          GCMParameterSpec s = cipher.getParameters().getParameterSpec(GCMParameterSpec.class);
          out += ",initializationVector:" + E.encodeToString(s.getIV()) + ",authenticationTagLength:" + s.getTLen();
        } else {
          out += ",initializationVector:"
              + E.encodeToString(cipher.getParameters().getParameterSpec(IvParameterSpec.class).getIV());
        }
        System.out.println(out);
      }
    }
  }
}
"""


def _b64(text: str) -> str:
    """``text``'s UTF-8 as base64 after a "b" (an empty text is a word too)."""
    return "b" + base64.b64encode(text.encode("utf-8")).decode()


@pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK here")
def test_both_directions_against_the_jdk(tmp_path):
    (tmp_path / "Pwd.java").write_text(_JAVA)
    subprocess.run(["javac", "Pwd.java"], cwd=tmp_path, check=True, timeout=120)
    cases = [
        (pw, secret, cipher, bits)
        for pw in PASSWORDS
        for secret, cipher, bits in (("s3cret", CBC, 128), ("k\u00e9y \U0001f511", CBC, 256), ("s", GCM, 192))
    ]
    ours = [enc(pw, secret, cipher, key_length=bits, iterations=1000) for pw, secret, cipher, bits in cases]
    lines = [f"decode {_b64(secret)} {stored}" for (_, secret, _, _), stored in zip(cases, ours, strict=True)]
    lines += [f"encode {_b64(secret)} {cipher} {bits} 1000 {_b64(pw)}" for pw, secret, cipher, bits in cases]
    out = subprocess.run(
        ["java", "-cp", str(tmp_path), "Pwd"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.splitlines()
    assert len(out) == 2 * len(cases)
    # the JDK reads what kafkatool wrote, with the length Kafka checks
    assert out[: len(cases)] == [f"{_b64(pw)} true" for pw, *_ in cases]
    # kafkatool reads what the JDK wrote
    for (pw, secret, _, _), stored in zip(cases, out[len(cases) :], strict=True):
        assert PE.decode(stored, secret) == pw
