#!/usr/bin/env bash
# Installs everything kafkatool and its tests need on a fresh Debian machine:
# Debian's ZooKeeper (the tests start a real server), kcat (a real librdkafka
# client), a Java runtime for ZooKeeper and Spark, iproute2 (network namespaces for the
# cluster's partition test), then this package with its
# dev extras.  Idempotent; run as root (or with sudo available).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
[ -f /usr/share/java/zookeeper.jar ] || need_apt+=(zookeeper)
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)  # the cluster tests' network namespaces
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

python3 -m pip install -q --disable-pip-version-check -e '.[dev]'

# man pages where man(1) finds them (`man kafkatool`); without the rights, say so and go on
./scripts/install-man.sh || echo "setup.sh: man pages not installed (see above); MANDIR=DIR ./scripts/install-man.sh installs them elsewhere" >&2
