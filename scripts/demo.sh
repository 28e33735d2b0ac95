#!/usr/bin/env bash
# THE demo command: set up, create a small partitioned Paimon table with the lakeformat CLI, write
# three batches into it, compact its manifests and inspect it. (The Airflow demo arrives with the
# Airflow layer.)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"

WAREHOUSE=demo-warehouse
TABLE="$WAREHOUSE/db.db/events"
rm -rf "$WAREHOUSE"
mkdir -p "$WAREHOUSE/input"

cat > "$WAREHOUSE/input/schema.json" <<'JSON'
[
  {"name": "dt", "type": "DATE"},
  {"name": "country", "type": "STRING"},
  {"name": "id", "type": "BIGINT NOT NULL"},
  {"name": "amount", "type": "DECIMAL(10, 2)"},
  {"name": "ts", "type": "TIMESTAMP(6)"}
]
JSON
for batch in 1 2 3; do
  {
    echo "dt,country,id,amount,ts"
    for i in $(seq 1 20); do
      echo "2024-01-0$(( (i % 3) + 1 )),$([ $((i % 2)) -eq 0 ] && echo NL || echo FR),$((batch * 1000 + i)),$i.$((i % 100)),2024-01-01 10:00:0$((i % 10))"
    done
  } > "$WAREHOUSE/input/batch$batch.csv"
done

echo "== lakeformat create-table"
lakeformat create-table "$TABLE" --schema "$WAREHOUSE/input/schema.json" --partition-keys dt,country
for batch in 1 2 3; do
  echo "== lakeformat write (batch $batch)"
  lakeformat write "$TABLE" --from "$WAREHOUSE/input/batch$batch.csv"
done
echo "== lakeformat compact-manifests --full"
lakeformat compact-manifests "$TABLE" --full
echo "== lakeformat snapshots"
lakeformat snapshots "$TABLE"
echo "== lakeformat inspect"
lakeformat inspect "$TABLE"
