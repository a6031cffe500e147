"""A client certificate the broker rejects is answered with the TLS alert Kafka's sends.

Kafka's TLS is the JVM's (SslFactory -> SSLEngine): when its trust manager rejects a client's
certificate, whatever the reason (an unknown CA, expired, not yet valid), the alert does not
name the reason: ``bad_certificate`` (42) is what librdkafka sees from Kafka (its test 0097),
``handshake_failure`` (40) since Java 23, ``certificate_unknown`` (46) in some JSSE versions
(OpenJSSE's checkClientCerts). OpenSSL names the reason instead (``unknown_ca`` 48,
``certificate_expired`` 45 ...), which no Kafka sends, and a client that checks the alert, as
0097 does, sees a broker that is not Kafka. This answers ``bad_certificate``.

The ``ssl`` module has no verify callback, so this installs one on the listener's ``SSL_CTX``
through ``ctypes``: it logs OpenSSL's reason and turns the failure into
``X509_V_ERR_CERT_REJECTED``, which OpenSSL answers with ``bad_certificate``. It is installed
only when every check passes (CPython on Linux, the ``libssl`` the ``ssl`` module has loaded,
the same OpenSSL version, the context's pointer confirmed by its verify mode and options);
otherwise the context is left as it is and OpenSSL's alert stands.
"""

from __future__ import annotations

import ctypes
import logging
import platform
import ssl

log = logging.getLogger("kafkatool.broker")

_X509_V_ERR_CERT_REJECTED = 28
_SSL_VERIFY_PEER = 0x01
_SSL_VERIFY_FAIL_IF_NO_PEER_CERT = 0x02
_VERIFY_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


def _loaded_libssl() -> ctypes.CDLL | None:
    """The libssl the ``ssl`` module runs on (already mapped into this process), or None."""
    if platform.python_implementation() != "CPython":
        return None
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "libssl.so" in line and "/" in line}
    except OSError:
        return None
    if len(paths) != 1:
        return None
    try:
        lib = ctypes.CDLL(paths.pop())
        lib.OpenSSL_version_num.restype = ctypes.c_ulong
        if lib.OpenSSL_version_num() != ssl.OPENSSL_VERSION_NUMBER:
            return None
        lib.SSL_CTX_get_verify_mode.restype = ctypes.c_int
        lib.SSL_CTX_get_verify_mode.argtypes = [ctypes.c_void_p]
        lib.SSL_CTX_get_options.restype = ctypes.c_uint64
        lib.SSL_CTX_get_options.argtypes = [ctypes.c_void_p]
        lib.SSL_CTX_set_verify.restype = None
        lib.SSL_CTX_set_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, _VERIFY_CB]
        lib.X509_STORE_CTX_get_error.restype = ctypes.c_int
        lib.X509_STORE_CTX_get_error.argtypes = [ctypes.c_void_p]
        lib.X509_STORE_CTX_get_error_depth.restype = ctypes.c_int
        lib.X509_STORE_CTX_get_error_depth.argtypes = [ctypes.c_void_p]
        lib.X509_STORE_CTX_set_error.restype = None
        lib.X509_STORE_CTX_set_error.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.X509_verify_cert_error_string.restype = ctypes.c_char_p
        lib.X509_verify_cert_error_string.argtypes = [ctypes.c_long]
    except (OSError, AttributeError):
        return None
    return lib


_LIB = _loaded_libssl()


def _reject(preverify_ok: int, store: int) -> int:
    if preverify_ok:
        return 1
    err = _LIB.X509_STORE_CTX_get_error(store)
    reason = _LIB.X509_verify_cert_error_string(err).decode(errors="replace")
    log.info("client certificate rejected (depth %d): %s", _LIB.X509_STORE_CTX_get_error_depth(store), reason)
    _LIB.X509_STORE_CTX_set_error(store, _X509_V_ERR_CERT_REJECTED)
    return 0


_CALLBACK = _VERIFY_CB(_reject)  # one for every context, alive as long as the module


def _ssl_ctx_pointer(ctx: ssl.SSLContext) -> int | None:
    """CPython's PySSLContext keeps ``SSL_CTX *ctx`` right after the object header."""
    ptr = ctypes.c_void_p.from_address(id(ctx) + object.__basicsize__).value
    if not ptr:
        return None
    expected = {
        ssl.CERT_OPTIONAL: _SSL_VERIFY_PEER,
        ssl.CERT_REQUIRED: _SSL_VERIFY_PEER | _SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
    }
    if _LIB.SSL_CTX_get_verify_mode(ptr) & 0x03 != expected.get(ctx.verify_mode):
        return None
    if _LIB.SSL_CTX_get_options(ptr) != int(ctx.options):
        return None
    return ptr


def reject_as_bad_certificate(ctx: ssl.SSLContext) -> bool:
    """Make ``ctx`` (a server context asking for client certificates) answer a rejected one with
    ``bad_certificate``; False when this Python or OpenSSL does not allow it (nothing changed)."""
    if _LIB is None or ctx.verify_mode == ssl.CERT_NONE:
        return False
    ptr = _ssl_ctx_pointer(ctx)
    if ptr is None:
        return False
    _LIB.SSL_CTX_set_verify(ptr, _LIB.SSL_CTX_get_verify_mode(ptr), _CALLBACK)
    return True
