#!/usr/bin/env bash
# Runs the study: builds what it needs, measures, prints the summary, writes the reports.
#
#   bash tools/study.sh [--quick] [--only tree-overhead,workloads,real-programs] [--rounds N]
#
# (from any directory; as root or with sudo for missing packages). Installs missing Debian
# packages, then hands over to tools/study/run.py, which says what each part measures:
# raw results in results/, reports with figures in papers/<study>/, the summary printed and
# written to results/summary.md. Environment: JOBS (parallel build jobs, default 2).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/install-deps.sh
exec /usr/bin/python3 tools/study/run.py "$@"
