#!/usr/bin/env bash
# THE demo command: set up, materialise a small Paimon table in ./demo-warehouse, and inspect it.
# For now the table is the bundled pypaimon-written sample warehouse (tests/fixtures/); a real
# table-creation step replaces this later.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

rm -rf demo-warehouse
mkdir -p demo-warehouse
tar -xzf tests/fixtures/pypaimon-2.1.0-sample-warehouse.tar.gz -C demo-warehouse
echo "demo.sh: unpacked the pypaimon 2.1.0 sample warehouse into ./demo-warehouse/warehouse"
echo

.venv/bin/lakeformat inspect demo-warehouse/warehouse/db.db/append_ovw_tbl
