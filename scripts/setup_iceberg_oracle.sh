#!/usr/bin/env bash
# Idempotent setup of the Java Iceberg oracle environment, .venv-iceberg (used by tests/interop/iceberg_oracle.py
# through tests/support/java_iceberg.py). Java Iceberg 1.10.2 runs in Spark 3.5.7, which cannot share .venv
# (pyspark 4.3), and Maven Central is out of reach, so everything comes from PyPI and Debian:
#   1. .venv-iceberg <- requirements/iceberg.lock (pyspark 3.5.7 + a wheel shipping the Iceberg runtime jar);
#   2. .venv-iceberg/oracle-jars/iceberg-shaded-jackson-<v>.jar: the relocated Jackson the runtime jar lacks,
#      rebuilt from pyspark's own Jackson jars by scripts/relocate_jackson.py, then checked reference by reference;
#   3. .venv-iceberg/oracle-jars/sqlite-jdbc.jar + native/libsqlitejdbc.so: the SQLite JDBC driver for the shared
#      JDBC catalog, from Debian's libxerial-sqlite-jdbc-{java,jni} (apt-get download + dpkg -x, no install).
# A stamp file records the hash of the inputs; when unchanged (and the outputs exist) nothing is done.
# Needs .venv (for uv; run scripts/setup.sh), python3 >= 3.10, apt-get/dpkg for step 3 (runs `apt-get update`
# once if the packages are unknown, which needs root). Java 17 at $JAVA_HOME (default
# /usr/lib/jvm/java-17-openjdk-amd64) is needed to run the oracle, and its jmods/ make the jar check complete.
# Env: PYTHON (interpreter for the new venv, default python3), LAKEFORMAT_SKIP_ICEBERG=1 skips everything.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
log() { echo "setup_iceberg_oracle.sh: $*"; }
T0="$(now)"

if [ "${LAKEFORMAT_SKIP_ICEBERG:-0}" = "1" ]; then
  log "skipping .venv-iceberg (LAKEFORMAT_SKIP_ICEBERG=1)"
  exit 0
fi

PYTHON="${PYTHON:-python3}"
JAVA_HOME="${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}"
export UV_PYTHON_DOWNLOADS=never
VENV=.venv-iceberg
JARS="$VENV/oracle-jars"
UV="$ROOT/.venv/bin/uv"
SQLITE_PACKAGES=(libxerial-sqlite-jdbc-java libxerial-sqlite-jdbc-jni)

if [ ! -x "$UV" ]; then
  log "error: $UV not found; run scripts/setup.sh first (it installs uv into .venv)" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  t="$(now)"
  "$PYTHON" -m venv --without-pip "$VENV"
  log "created $VENV ($(elapsed "$t") s)"
fi

hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }
stamp="$VENV/.lakeformat-setup-stamp"
want="$(hash_of requirements/iceberg.lock scripts/relocate_jackson.py scripts/setup_iceberg_oracle.sh \
  <("$VENV/bin/python" -c 'import sys; print(sys.version)'))"
outputs_present() {
  compgen -G "$JARS/iceberg-shaded-jackson-*.jar" >/dev/null && [ -f "$JARS/sqlite-jdbc.jar" ] \
    && [ -f "$JARS/native/libsqlitejdbc.so" ]
}
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && outputs_present; then
  log "$VENV up to date ($(elapsed "$T0") s)"
  exit 0
fi
rm -f "$stamp"

# ---- 1. Python packages ----------------------------------------------------------------------
t="$(now)"
"$UV" pip install --python "$VENV/bin/python" --quiet -r requirements/iceberg.lock
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$VENV/bin/python" -c 'import pyspark, sys; sys.exit(pyspark.__version__ != "3.5.7")'
RUNTIME_JAR="$SITE/snowpark_connect_deps_iceberg/jars/iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
[ -f "$RUNTIME_JAR" ] || { log "error: $RUNTIME_JAR missing after install" >&2; exit 1; }
log "installed requirements/iceberg.lock into $VENV ($(elapsed "$t") s)"

# ---- 2. relocated Jackson + reference check --------------------------------------------------
t="$(now)"
mkdir -p "$JARS"
version="$(basename "$(ls "$SITE"/pyspark/jars/jackson-databind-[0-9]*.jar)" .jar)"
version="${version#jackson-databind-}"
rm -f "$JARS"/iceberg-shaded-jackson-*.jar
SHADED="$JARS/iceberg-shaded-jackson-$version.jar"
"$PYTHON" scripts/relocate_jackson.py build --out "$SHADED" --pyspark-jars "$SITE/pyspark/jars"
jdk_args=()
if [ -d "$JAVA_HOME/jmods" ]; then
  jdk_args=(--jdk "$JAVA_HOME")
else
  log "warning: no $JAVA_HOME/jmods; JDK supertypes are assumed rather than checked"
fi
if ! "$PYTHON" scripts/relocate_jackson.py check --runtime "$RUNTIME_JAR" --jar "$SHADED" "${jdk_args[@]}"; then
  rm -f "$SHADED"
  log "error: the relocated Jackson jar does not satisfy $(basename "$RUNTIME_JAR")" >&2
  exit 1
fi
log "built and checked $SHADED ($(elapsed "$t") s)"

# ---- 3. SQLite JDBC driver from Debian -------------------------------------------------------
if [ ! -f "$JARS/sqlite-jdbc.jar" ] || [ ! -f "$JARS/native/libsqlitejdbc.so" ]; then
  t="$(now)"
  work="$(mktemp -d "$ROOT/$JARS/debs.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  # apt-get download as root warns that the _apt sandbox user cannot write here; run it as root quietly.
  if ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
    log "error: apt-get/dpkg not found: the SQLite JDBC driver comes from Debian's ${SQLITE_PACKAGES[*]}" \
      "(set LAKEFORMAT_SKIP_ICEBERG=1 to skip the Java Iceberg oracle)" >&2
    exit 1
  fi
  download() { (cd "$work" && apt-get download -o APT::Sandbox::User=root "$@" >/dev/null); }
  if ! download "${SQLITE_PACKAGES[@]}"; then
    log "packages not found; running apt-get update once"
    apt-get update -qq
    download "${SQLITE_PACKAGES[@]}"
  fi
  for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/root"; done
  mkdir -p "$JARS/native"
  cp -L "$work/root/usr/share/java/xerial-sqlite-jdbc.jar" "$JARS/sqlite-jdbc.jar.tmp"
  cp -L "$work/root/usr/lib/x86_64-linux-gnu/jni/libsqlitejdbc.so" "$JARS/native/libsqlitejdbc.so"
  # libsqlitejdbc.so links the system libsqlite3.so.0; bring it along when the system lacks it
  # (the oracle puts native/ on LD_LIBRARY_PATH).
  if ! ldconfig -p 2>/dev/null | grep -q 'libsqlite3\.so\.0 '; then
    download libsqlite3-0
    dpkg -x "$work"/libsqlite3-0_*.deb "$work/root"
    cp -L "$work"/root/usr/lib/x86_64-linux-gnu/libsqlite3.so.0 "$JARS/native/"
  fi
  (cd "$work" && ls ./*.deb) > "$JARS/native/DEBIAN-PACKAGES"
  mv "$JARS/sqlite-jdbc.jar.tmp" "$JARS/sqlite-jdbc.jar"
  rm -rf "$work"
  trap - EXIT
  log "unpacked ${SQLITE_PACKAGES[*]} into $JARS ($(elapsed "$t") s)"
fi

if [ ! -x "$JAVA_HOME/bin/java" ]; then
  log "warning: no Java at JAVA_HOME=$JAVA_HOME; the oracle needs Java 17 (set JAVA_HOME)"
fi
echo "$want" > "$stamp"
log "done in $(elapsed "$T0") s"
