"""The Iceberg tests read manifest lists and manifests with the regex scanner from the first record.

``core/iceberg/reach/reach_decode.py`` compiles a writer schema's pattern only after 5,000 of its records (small
tables never pay the compile); the tables here are small, so without this every test would take the
reference decode and the scanned one would be proven only by the unit tests and the benchmarks.
"""

from __future__ import annotations

import pytest

from airflow_lakeformat.core.iceberg.reach import reach_decode


@pytest.fixture(autouse=True)
def scan_iceberg_metadata_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reach_decode, "SCAN_AFTER_RECORDS", 0)
