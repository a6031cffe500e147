#!/usr/bin/env bash
# Installs everything kafkatool and its tests need on a fresh Debian machine:
# Debian's ZooKeeper (the tests start a real server), kcat (a real librdkafka
# client), node and npm (kafkajs, a JavaScript client, from tests/clients/js's lock file),
# a JDK for ZooKeeper and Spark, iproute2 (network namespaces for the cluster's partition
# test), man, Python 3.11+ with pip, gcc and the interpreter's headers, then this package
# with its dev extras, and builds the compiled hot path.  Idempotent; run as root (or with
# sudo available).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
[ -f /usr/share/java/zookeeper.jar ] || need_apt+=(zookeeper)
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
# a JDK, not only a runtime: tests compile a Java program to compare our UTF-8 decoding with Java's
command -v javac >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
command -v man >/dev/null 2>&1 || need_apt+=(man-db)  # the man pages' install test reads them with man
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)  # the cluster tests' network namespaces
# node and npm: kafkajs, a JavaScript Kafka client, runs against serve in tests/clients
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
# the compiled hot path (tools/build_accel.py): a C compiler and the interpreter's headers
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)
# Python 3.11 or newer with pip: the machine's own python3 if it has both (a pyenv build, say),
# else Debian's (bookworm's python3 is 3.11; pip and venv are packages of their own there)
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then
  need_apt+=(python3 python3-pip python3-venv python3-dev)
else
  python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip python3-venv)
  # Debian's python3 has its headers in python3-dev (a pyenv build has its own)
  python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    || need_apt+=(python3-dev)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

# Debian's python3 is marked externally managed (PEP 668): pip refuses to install into it
# unless told to.  As root it installs into /usr/local/lib/python3.*/dist-packages, beside (not
# over) what apt installed, which is what this machine-wide test set-up wants.
if python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
  export PIP_BREAK_SYSTEM_PACKAGES=1
fi
python3 -m pip install -q --disable-pip-version-check -e '.[dev]'

# kafkajs as tests/clients/js/package-lock.json pins it, into tests/clients/js/node_modules
# (gitignored); npm ci installs exactly the lock file's versions, checked by their integrity hashes
npm ci --prefix tests/clients/js --no-audit --no-fund --loglevel=error

# the compiled hot path: the hot modules compiled by Cython into kafkatool/_accel/ (only what
# changed since the last build; a few minutes from scratch on 2 cores); a failure stops here
python3 tools/build_accel.py

# man pages where man(1) finds them (`man kafkatool`); without the rights, say so and go on
./scripts/install-man.sh || echo "setup.sh: man pages not installed (see above); MANDIR=DIR ./scripts/install-man.sh installs them elsewhere" >&2
