"""Broker security: TLS listeners (tls.py); the principal each connection carries."""
