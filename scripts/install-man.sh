#!/usr/bin/env bash
# Installs kafkatool's man pages (man/*.1) where man(1) finds them, so that
# `man kafkatool` and `man kafkatool-verify` work.  Default target:
# /usr/local/share/man/man1 (in man's default search path on Debian and most
# systems); MANDIR=/some/share/man overrides it.  Refreshes man's index when
# mandb is available.  Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

MANDIR="${MANDIR:-/usr/local/share/man}"
SUDO=""
probe="$MANDIR"
while [ ! -e "$probe" ]; do probe="$(dirname "$probe")"; done
if [ ! -w "$probe" ] && [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-man.sh: $MANDIR is not writable and sudo is not available" >&2
    exit 1
  fi
  SUDO="sudo"
fi
$SUDO install -d "$MANDIR/man1"
$SUDO install -m 644 man/*.1 "$MANDIR/man1/"
if command -v mandb >/dev/null 2>&1; then
  $SUDO mandb -q "$MANDIR" >/dev/null 2>&1 || true
fi
echo "man pages installed in $MANDIR/man1 ($(ls man/*.1 | wc -l) pages): try 'man kafkatool'"
