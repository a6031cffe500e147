"""kafkatool: operator CLI and on-disk forensics toolkit for Apache Kafka."""

from kafkatool import accel as _accel

__version__ = "0.1.0"

# the compiled hot path's finder, before any listed module is imported (kafkatool/accel.py)
_accel.install()
