#!/usr/bin/env bash
# Runs the study: builds what it needs, measures, prints the summary, writes the reports.
#
#   bash tools/study.sh [--quick] [--only tree-overhead,workloads,real-programs] [--rounds N]
#
# (from any directory; as root or with sudo for missing packages). Installs missing Debian
# packages, then hands over to tools/study/run.py, which says what each part measures:
# raw results in results/, reports with figures in papers/<study>/, the summary printed and
# written to results/summary.md. The whole study takes about 100 minutes on 2 cores.
#
# --quick: a first result of every part in about 10 minutes on 2 cores from a fresh clone,
# builds included (the release tree and five libraries of the 2008 designs): one short round
# of each part, cut to its essentials, a check of the pipeline rather than a measurement. Its
# raw results, reports and summary go to results/quick/ (reports in results/quick/papers/),
# never over the committed reports in papers/.
#
# Progress goes to the output a line per event: "part k of n: NAME", the round within it, an
# estimate of the time left, and each build's start, progress once a minute and end; the time
# of each part is printed before the summary. Environment: JOBS (parallel build jobs, default 2).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/install-deps.sh
exec /usr/bin/python3 tools/study/run.py "$@"
