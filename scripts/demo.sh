#!/usr/bin/env bash
# THE demo command: set up, then run the example DAGs in dags/ with `airflow dags test` against an embedded
# default: a local warehouse (./demo-warehouse), Spark in local[2] mode, and a SQLite Airflow database
# (./demo-airflow). Ingest writes four batches (one of them with spark-submit), the downstream DAGs see the
# new snapshots, then maintenance compacts the small files, expires old snapshots, compacts the manifests
# and removes an orphan file. Then an Apache Iceberg table in an SQL catalog on SQLite
# (./demo-warehouse/iceberg_catalog.db) gets four batches and its maintenance (expire -> compact manifests ->
# remove orphans). Both tables are summarized before and after maintenance.
#
# Needs python3 >= 3.10 and, for the Spark step, Java 17 (JAVA_HOME, default
# /usr/lib/jvm/java-17-openjdk-amd64). Each DAG run's full log is kept in demo-airflow/demo-logs/.
# LAKEFORMAT_DEMO_DIR puts demo-warehouse/ and demo-airflow/ elsewhere (default: the repository).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

# Only what the demo runs: the peers' environments (pypaimon, the Java Iceberg oracle: 34 s of an 81 s cold
# set-up) and PostgreSQL serve the tests alone.
LAKEFORMAT_SKIP_PYPAIMON="${LAKEFORMAT_SKIP_PYPAIMON:-1}" LAKEFORMAT_SKIP_ICEBERG="${LAKEFORMAT_SKIP_ICEBERG:-1}" \
  LAKEFORMAT_SKIP_POSTGRES="${LAKEFORMAT_SKIP_POSTGRES:-1}" bash scripts/setup.sh
export PATH="$ROOT/.venv/bin:$PATH"

export JAVA_HOME="${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}"
if [ ! -x "$JAVA_HOME/bin/java" ]; then
  echo "demo.sh: error: no Java at JAVA_HOME=$JAVA_HOME; Spark needs Java 17 (set JAVA_HOME)" >&2
  exit 1
fi
export PYSPARK_PYTHON="$ROOT/.venv/bin/python" SPARK_LOCAL_IP=127.0.0.1

DEMO_DIR="${LAKEFORMAT_DEMO_DIR:-$ROOT}"
WAREHOUSE="$DEMO_DIR/demo-warehouse"
TABLE="$WAREHOUSE/demo.db/events"
export AIRFLOW_HOME="$DEMO_DIR/demo-airflow"
LOGS="$AIRFLOW_HOME/demo-logs"
rm -rf "$WAREHOUSE" "$AIRFLOW_HOME"
mkdir -p "$WAREHOUSE" "$LOGS"

export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__DAGS_FOLDER="$ROOT/dags"
export AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION=False
# The example DAGs' table, demo.events, is placed under this connection's warehouse: $TABLE.
export AIRFLOW_CONN_LAKEFORMAT_DEFAULT="{\"conn_type\": \"lakeformat\", \"host\": \"$WAREHOUSE\"}"
# The Iceberg example's connection: the same warehouse plus an SQL catalog on SQLite, so its demo.events_iceberg
# is a table of that catalog (its files under $WAREHOUSE/iceberg/demo/events_iceberg).
ICEBERG_CATALOG="{\"type\": \"sql\", \"uri\": \"sqlite:///$WAREHOUSE/iceberg_catalog.db\", \"warehouse\": \"file://$WAREHOUSE/iceberg\"}"
export AIRFLOW_CONN_LAKEFORMAT_ICEBERG="{\"conn_type\": \"lakeformat\", \"host\": \"$WAREHOUSE\", \"extra\": {\"iceberg_catalog_properties\": $ICEBERG_CATALOG, \"commit_user_prefix\": \"demo\"}}"
export LAKEFORMAT_ICEBERG_CONN_ID=lakeformat_iceberg
ICEBERG_TABLE=demo.events_iceberg
export AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "client", "spark-binary": "spark-submit"}}'
export LAKEFORMAT_SENSOR_POLL_INTERVAL=2
export PYTHONWARNINGS=ignore  # keeps the task output below readable; the logs in $LOGS are complete

RUNS=0
run_dag() {  # run_dag DAG_ID [airflow dags test options...]
  local dag="$1"; shift
  RUNS=$((RUNS + 1))
  local log="$LOGS/$(printf '%02d' "$RUNS")-$dag.log"
  echo "-- airflow dags test $dag $*"
  if ! airflow dags test "$dag" "$@" > "$log" 2>&1; then
    python scripts/demo_report.py log "$log"
    echo "demo.sh: error: $dag failed; its log: $log" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
  python scripts/demo_report.py log "$log"
}

echo "== Airflow metadata database (SQLite): $AIRFLOW_HOME"
airflow db migrate > "$LOGS/00-db-migrate.log" 2>&1

echo "== Ingest: three batches written in the worker, one by a Spark job (spark-submit, local[2])"
for _ in 1 2 3; do
  run_dag lakeformat_ingest
done
LAKEFORMAT_INGEST_EXECUTION=spark run_dag lakeformat_ingest

echo "== Downstream: the deferrable sensor (asked for a snapshot after 3) and the Asset-scheduled DAG"
run_dag lakeformat_downstream_sensor --conf '{"after_snapshot_id": 3}'
run_dag lakeformat_downstream_asset
python scripts/demo_report.py assets demo.events  # the Asset the DAGs name: lakeformat://lakeformat_default/demo.events

echo "== A crashed writer's leftover: a data file no snapshot references, two days old"
PARTITION="$(find "$TABLE" -maxdepth 1 -type d -name 'dt=*' | head -n 1)"
ORPHAN="$PARTITION/bucket-0/data-$(python -c 'import uuid; print(uuid.uuid4())')-0.parquet"
echo "never committed" > "$ORPHAN"
touch -d "2 days ago" "$ORPHAN"
echo "   $ORPHAN"

echo "== The table before maintenance"
python scripts/demo_report.py summary "$TABLE" "$LOGS/before.json"

# Retention is shortened for the demo (keep one snapshot, however young); the defaults keep 10 and 1 h.
CONF='{"min_file_count": 2, "retain_min": 1, "older_than": "1 ms"'
echo "== Manual maintenance, dry run (the Params' default): what each step would do"
run_dag lakeformat_manual_maintenance --conf "$CONF}"
echo "== Manual maintenance for real: compact data, expire snapshots, compact manifests, remove orphans"
run_dag lakeformat_manual_maintenance --conf "$CONF, \"dry_run\": false}"
echo "== Scheduled maintenance (a mapped task group per table): nothing left to do"
LAKEFORMAT_MAINTENANCE_TABLES="$TABLE" run_dag lakeformat_maintenance

echo "== Iceberg: create $ICEBERG_TABLE in the SQLite catalog, append four batches; maintenance as a dry run"
run_dag lakeformat_iceberg_maintenance --conf '{"batches": 4, "rows": 1000}'
# The last line: Airflow may log a warning on stdout while it reads the connection.
ICEBERG_ROOT="$(python scripts/demo_report.py root "$ICEBERG_TABLE" "$LAKEFORMAT_ICEBERG_CONN_ID" | tail -n 1)"
ICEBERG_ORPHAN="$ICEBERG_ROOT/data/$(python -c 'import uuid; print(uuid.uuid4())').parquet"
echo "never committed" > "$ICEBERG_ORPHAN"
touch -d "4 days ago" "$ICEBERG_ORPHAN"  # Iceberg's orphan age is 3 days by default
echo "   an orphan four days old: $ICEBERG_ORPHAN"
echo "== The Iceberg table before maintenance"
python scripts/demo_report.py summary "$ICEBERG_TABLE" "$LOGS/iceberg-before.json" "$LAKEFORMAT_ICEBERG_CONN_ID"
echo "== Iceberg maintenance for real: compact data files, expire snapshots, compact manifests, remove orphans"
run_dag lakeformat_iceberg_maintenance --conf '{"batches": 0, "dry_run": false, "retain_min": 1, "older_than": "1 ms"}'

echo "== Before -> after"
python scripts/demo_report.py compare "$TABLE" "$LOGS/before.json"
python scripts/demo_report.py compare "$ICEBERG_TABLE" "$LOGS/iceberg-before.json" "$LAKEFORMAT_ICEBERG_CONN_ID"
echo "== Done: $RUNS DAG runs; logs in $LOGS; inspect further with: .venv/bin/lakeformat inspect $TABLE"
