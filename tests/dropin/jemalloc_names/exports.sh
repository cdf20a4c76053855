#!/usr/bin/env bash
# Drop-in test: libpagemalloc_je.so exports exactly libpagemalloc.so's interface plus
# jemalloc's names (tests/dropin/exports.sh with PAGEMALLOC_JEMALLOC_NAMES=1).
#
#   bash tests/dropin/jemalloc_names/exports.sh path/to/libpagemalloc_je.so
set -euo pipefail
PAGEMALLOC_JEMALLOC_NAMES=1 exec bash "$(dirname "${BASH_SOURCE[0]}")/../exports.sh" "$@"
