#!/usr/bin/env bash
# Regenerate the committed lock files (Airflow's constraint files can't be downloaded, so we lock ourselves).
#   requirements/dev.lock      <- pyproject.toml (runtime deps + [dev] extra) + requirements/dev.in
#   requirements/pypaimon.lock <- requirements/pypaimon.in (separate interop venv)
#   requirements/iceberg.lock  <- requirements/iceberg.in (separate Java Iceberg oracle venv)
#   requirements/runtime.lock  <- pyproject.toml (runtime deps + airflow, spark, s3 extras) + requirements/runtime.in,
#                                 constrained by dev.lock (the docker image: no dev tools, the tested pins)
# Usage: bash scripts/lock.sh [extra uv pip compile args, e.g. --upgrade or --upgrade-package NAME]
set -euo pipefail
cd "$(dirname "$0")/.."
UV="${UV:-}"
if [ -z "$UV" ]; then
  if [ -x .venv/bin/uv ]; then UV=.venv/bin/uv; elif command -v uv >/dev/null 2>&1; then UV=uv; else
    echo "lock.sh: uv not found; run scripts/setup.sh first (it installs uv into .venv)" >&2; exit 1
  fi
fi
common=(--python-version 3.11 --no-header)
# The current lock is handed to uv as the output file's previous contents, so adding a dependency keeps
# every existing pin unless it must move (uv prefers the pins of an existing -o file).
lock() {  # lock OUT HEADER ARGS...
  local out="$1" header="$2"; shift 2
  local tmp; tmp="$(mktemp)"
  [ -f "$out" ] && grep -v '^# .*Regenerate with' "$out" > "$tmp"
  "$UV" pip compile --quiet "${common[@]}" "$@" -o "$tmp" >/dev/null
  { echo "$header"; cat "$tmp"; } > "$out.tmp"
  rm -f "$tmp"
  mv "$out.tmp" "$out"
}
lock requirements/dev.lock "# Main dev/test environment for python 3.11. Regenerate with: bash scripts/lock.sh" \
  pyproject.toml requirements/dev.in --extra dev --override requirements/overrides.txt "$@"
lock requirements/pypaimon.lock \
  "# Separate pypaimon interop environment (.venv-pypaimon) for python 3.11. Regenerate with: bash scripts/lock.sh" \
  requirements/pypaimon.in "$@"
lock requirements/iceberg.lock \
  "# Separate Java Iceberg oracle environment (.venv-iceberg: pyspark 3.5 + Iceberg 1.10.2 jars) for python 3.11. Regenerate with: bash scripts/lock.sh" \
  requirements/iceberg.in "$@"
# After dev.lock: runtime.in constrains itself by it (-c dev.lock), so shared pins are equal.
lock requirements/runtime.lock \
  "# The docker image's environment (docker/Dockerfile, docker-compose.yaml) for python 3.11: no dev tools. Regenerate with: bash scripts/lock.sh" \
  pyproject.toml requirements/runtime.in --extra airflow --extra spark --extra s3 --override requirements/overrides.txt "$@"
echo "lock.sh: wrote requirements/dev.lock ($(grep -c '==' requirements/dev.lock) pins), requirements/runtime.lock ($(grep -c '==' requirements/runtime.lock) pins) and requirements/pypaimon.lock ($(grep -c '==' requirements/pypaimon.lock) pins)"
