#!/bin/sh
# kcat with the SASL_SSL settings run_sasl_ssl.py passes (KAFKATOOL_COMPAT_KCAT_X: space-separated -X k=v)
set -f
X=""
for kv in $KAFKATOOL_COMPAT_KCAT_X; do X="$X -X $kv"; done
exec kcat $X "$@"
