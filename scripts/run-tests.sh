#!/usr/bin/env bash
# Runs every test tier. pytest's exit code 5 ("no tests collected") is a failure here: a run that
# tested nothing must not look green.
set -uo pipefail
bin=${1:-.venv/bin}
"$bin/pytest" -q -p no:cacheprovider tests
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
