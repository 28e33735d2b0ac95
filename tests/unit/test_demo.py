"""The README's demo command runs end to end and shows the table it built."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_demo_script_creates_writes_compacts_and_inspects() -> None:
    proc = subprocess.run(
        ["bash", "scripts/demo.sh"], cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "snapshots        4 (1..4); latest COMPACT" in out
    assert "live files       18 files" in out and "60 rows" in out
    assert "manifests        1 manifests" in out
