#!/usr/bin/env bash
# Idempotent environment setup (needs only python3 >= 3.10 and PyPI):
#   .venv           main dev/test environment: requirements/dev.lock + this package (editable, --no-deps)
#   .venv-pypaimon  separate interop environment: requirements/pypaimon.lock (pypaimon can't live next to Airflow)
# Existing virtualenvs are reused, never deleted. A stamp file inside each venv records the hash of its
# inputs (lock file, pyproject.toml, python version); when unchanged, nothing is installed.
# Env: PYTHON (interpreter for new venvs, default python3), LAKEFORMAT_SKIP_PYPAIMON=1 skips .venv-pypaimon.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

PYTHON="${PYTHON:-python3}"
export UV_PYTHON_DOWNLOADS=never   # always use the interpreter of the venv we point uv at
export PIP_DISABLE_PIP_VERSION_CHECK=1

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
log() { echo "setup.sh: $*"; }
T0="$(now)"

if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
  log "error: $PYTHON is missing or older than Python 3.10" >&2
  exit 1
fi

hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }
py_version() { "$1" -c 'import sys; print(sys.version)'; }

ensure_venv() {  # ensure_venv DIR [venv args...]
  local dir="$1"; shift
  if [ ! -x "$dir/bin/python" ]; then
    local t; t="$(now)"
    "$PYTHON" -m venv "$@" "$dir"
    log "created $dir ($(elapsed "$t") s)"
  fi
}

# ---- .venv (main) ---------------------------------------------------------------------------
ensure_venv .venv
UV="$ROOT/.venv/bin/uv"
UV_VERSION="$(sed -n 's/^uv==\([^ ;]*\).*/\1/p' requirements/dev.lock)"
if [ ! -x "$UV" ] || [ "$("$UV" --version | awk '{print $2}')" != "$UV_VERSION" ]; then
  t="$(now)"
  .venv/bin/python -m pip install --quiet "uv==${UV_VERSION:?uv must be pinned in requirements/dev.lock}"
  log "installed uv $UV_VERSION into .venv ($(elapsed "$t") s)"
fi

stamp=".venv/.lakeformat-setup-stamp"
want="$(hash_of requirements/dev.lock pyproject.toml <(py_version .venv/bin/python))"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/lakeformat ]; then
  log ".venv up to date"
else
  t="$(now)"
  # --no-deps: the lock is complete and drops pyspark-client on purpose (requirements/overrides.txt);
  # resolving again would pull it back in and clobber pyspark's files.
  "$UV" pip install --python .venv/bin/python --quiet --no-deps -r requirements/dev.lock
  "$UV" pip install --python .venv/bin/python --quiet --no-deps -e .
  echo "$want" > "$stamp"
  log "installed requirements/dev.lock + editable airflow-lakeformat into .venv ($(elapsed "$t") s)"
fi

# ---- .venv-pypaimon (interop oracle) ----------------------------------------------------------
if [ "${LAKEFORMAT_SKIP_PYPAIMON:-0}" = "1" ]; then
  log "skipping .venv-pypaimon (LAKEFORMAT_SKIP_PYPAIMON=1)"
else
  ensure_venv .venv-pypaimon --without-pip
  stamp=".venv-pypaimon/.lakeformat-setup-stamp"
  want="$(hash_of requirements/pypaimon.lock <(py_version .venv-pypaimon/bin/python))"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    log ".venv-pypaimon up to date"
  else
    t="$(now)"
    "$UV" pip install --python .venv-pypaimon/bin/python --quiet -r requirements/pypaimon.lock
    .venv-pypaimon/bin/python -c 'import pypaimon, pyarrow, fastavro' >/dev/null
    echo "$want" > "$stamp"
    log "installed requirements/pypaimon.lock into .venv-pypaimon ($(elapsed "$t") s)"
  fi
fi
# ---- PostgreSQL server for tests/airflow/test_compose_runtime.py (begin: docker-compose section) -------
# That test runs the compose stack's services on a real PostgreSQL (initdb/pg_ctl from Debian's postgresql
# package; no cluster of the package is used). Installed when missing and we may (root + apt-get); otherwise
# the test fails and says why. LAKEFORMAT_SKIP_POSTGRES=1 skips this step and those tests. The test builds the image's venv,
# .venv-compose, itself (from requirements/runtime.lock, cached).
if [ "${LAKEFORMAT_SKIP_POSTGRES:-0}" != "1" ] && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    t="$(now)"
    export DEBIAN_FRONTEND=noninteractive
    if apt-get install -y -q --no-install-recommends postgresql >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends postgresql >/dev/null 2>&1; }; then
      log "installed Debian's postgresql package ($(elapsed "$t") s)"
    else
      log "could not install Debian's postgresql package: tests/airflow/test_compose_runtime.py will fail (LAKEFORMAT_SKIP_POSTGRES=1 skips it)"
    fi
  else
    log "no PostgreSQL server (/usr/lib/postgresql/*/bin/initdb) and not root with apt-get: tests/airflow/test_compose_runtime.py will fail (LAKEFORMAT_SKIP_POSTGRES=1 skips it)"
  fi
fi
# ---- (end: docker-compose section) ----------------------------------------------------------------
# ---- Headless Chromium for the UI page's browser check (tests/airflow/test_compose_runtime.py) ------------
# Debian's chromium and chromium-driver (selenium drives /usr/bin/chromedriver; nothing is downloaded at run
# time). Installed when missing and we may (root + apt-get), as PostgreSQL above; otherwise that check fails
# and says why. LAKEFORMAT_SKIP_CHROMIUM=1 skips this step and the check.
if [ "${LAKEFORMAT_SKIP_CHROMIUM:-0}" != "1" ] && { [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; }; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    t="$(now)"
    export DEBIAN_FRONTEND=noninteractive
    if apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null 2>&1; }; then
      log "installed Debian's chromium and chromium-driver packages ($(elapsed "$t") s)"
    else
      log "could not install Debian's chromium/chromium-driver: the UI check of tests/airflow/test_compose_runtime.py will fail (LAKEFORMAT_SKIP_CHROMIUM=1 skips it)"
    fi
  else
    log "no /usr/bin/chromium + /usr/bin/chromedriver and not root with apt-get: the UI check of tests/airflow/test_compose_runtime.py will fail (LAKEFORMAT_SKIP_CHROMIUM=1 skips it)"
  fi
fi
bash scripts/setup_iceberg_oracle.sh  # .venv-iceberg: the Java Iceberg oracle (LAKEFORMAT_SKIP_ICEBERG=1 skips it)

log "done in $(elapsed "$T0") s"
