"""kafkatool: operator CLI and on-disk forensics toolkit for Apache Kafka."""

__version__ = "0.1.0"
