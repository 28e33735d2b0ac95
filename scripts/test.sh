#!/usr/bin/env bash
# THE test command: environment setup, lint, format check, type check, layering check, then every test.
# Runs all steps even when one fails, and exits non-zero if any failed (pytest's exit code 5,
# "no tests collected", counts as a failure).
set -uo pipefail
cd "$(dirname "$0")/.."

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
T0="$(now)"

bash scripts/setup.sh || { echo "test.sh: scripts/setup.sh failed" >&2; exit 1; }
export PATH="$PWD/.venv/bin:$PATH"

failed=()
step() {  # step NAME CMD...
  local name="$1"; shift
  local t; t="$(now)"
  echo "==> $name: $*"
  "$@"
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    failed+=("$name (exit $rc)")
  fi
  echo "<== $name: exit $rc ($(elapsed "$t") s)"
  return 0
}

step "ruff check" .venv/bin/ruff check .
step "ruff format" .venv/bin/ruff format --check .
step "mypy" .venv/bin/mypy airflow_lakeformat
step "lint-imports" .venv/bin/lint-imports
# Every test, all markers, nothing deselected.
step "pytest" .venv/bin/python -m pytest -p no:cacheprovider

echo "test.sh: total $(elapsed "$T0") s"
if [ "${#failed[@]}" -ne 0 ]; then
  echo "test.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: all checks passed"
