"""Rebuild tests/fixtures/paimon_pk/pk-tables.tar.gz: the primary-key tables pypaimon 2.1 writes for the
merge-tree compaction tests (``tests/interop/pypaimon_pk_scenarios.py`` describes them).

Run from the repository root with the main venv (pypaimon runs in ``.venv-pypaimon`` through the oracle):

    .venv/bin/python scripts/make_paimon_pk_fixtures.py

Tests never rebuild the tables; they unpack this archive once per session and copy a table per test.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.paimon_pk import ARCHIVE, make_fixture_archive


def main() -> int:
    document = make_fixture_archive()
    commits = sum(table["commits"] for table in document["tables"].values())
    print(f"{ARCHIVE}: {ARCHIVE.stat().st_size} bytes, {len(document['tables'])} tables, {commits} commits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
