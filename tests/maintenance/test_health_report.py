"""The health report (issue 28 point 2): the document's file-size histogram and snapshot times, the three SVG
charts drawn from it and the self-contained HTML page.

The documents are real: ``assess`` (the same code as ``table.health()``) over collector inputs made here, and
one real Paimon table. The charts are parsed as XML and their marks compared with the document: bar counts
and heights with the histogram, the retention line between the expirable and the kept snapshots, the worst
partitions kept, a hostile partition value escaped.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_lakeformat.cli import main
from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.health.assess import assess
from airflow_lakeformat.core.health.charts import (
    file_size_chart,
    partition_chart,
    snapshot_chart,
)
from airflow_lakeformat.core.health.model import FileFacts, FileSizeHistogram, HealthInputs, retention_limits
from airflow_lakeformat.core.health.report_html import render_report, write_report
from airflow_lakeformat.core.health.thresholds import Thresholds
from airflow_lakeformat.core.tables import open_table

NOW = 1_764_300_000_000
DAY = 86_400_000
HOSTILE = "p=<script>alert('x')</script>&\""


def inputs(files: list[FileFacts], **changes: Any) -> HealthInputs:
    values: dict[str, Any] = {
        "format": "iceberg",
        "table": "db.events",
        "snapshot_id": 7,
        "files": files,
        "manifest_sizes": [4000, 5000],
        "manifest_target_size": 8 << 20,
        "snapshot_count": 0,
        "oldest_snapshot_ms": None,
        "now_ms": NOW,
        "target_file_size": 1 << 20,
        "thresholds": Thresholds(),
        "retention": {
            "history.expire.max-snapshot-age-ms": 5 * DAY,
            "history.expire.min-snapshots-to-keep": 1,
        },
        **changes,
    }
    return HealthInputs(**values)


def svg(text: str) -> ET.Element:
    """The chart parsed as XML (it must be well-formed)."""
    assert text.startswith("<svg ") and text.endswith("</svg>")
    return ET.fromstring(text)


def marks(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(tag) if cls in (e.get("class") or "").split()]


def test_histogram_buckets_are_log_spaced_and_hold_every_file() -> None:
    sizes = [1023, 1024, 1025, 2047, 2048, 700_000, (1 << 20) - 1]
    h = FileSizeHistogram.of(sizes, target_file_size=1 << 20, small_file_threshold=786_432)
    assert h.edges == [1 << e for e in range(9, 22)]  # 512 B up to past the target (1 MiB)
    assert h.counts == [1, 3, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0]  # the target's own bucket [1 MiB, 2 MiB) empty
    wide = FileSizeHistogram.of([0, 3, 5 << 30], target_file_size=128 << 20, small_file_threshold=1)
    assert all(b == a * 4 for a, b in zip(wide.edges, wide.edges[1:], strict=False))  # step 4 past 20 buckets
    assert wide.edges[0] == 1 and wide.edges[-1] > 5 << 30 and wide.counts[0] == 2 and wide.counts[-1] == 1
    empty = FileSizeHistogram.of([], target_file_size=10, small_file_threshold=7)
    assert (empty.edges, empty.counts) == ([], [])
    assert retention_limits({"snapshot.time-retained": "1 h", "snapshot.num-retained.min": 10}) == (
        3_600_000,
        10,
    )
    assert retention_limits({"history.expire.max-snapshot-age-ms": "432000000"}) == (432_000_000, None)
    assert retention_limits({"snapshot.time-retained": "None"}) == (None, None)


def test_file_size_chart_bars_match_the_document_histogram() -> None:
    files = [FileFacts("p=a", "data", 10, 3000 + i) for i in range(6)]
    files += [FileFacts("p=b", "data", 10, 900_000), FileFacts("p=b", "position-deletes", 2, 500)]
    doc = assess(inputs(files)).to_json()
    histogram = doc["fileSizes"]
    assert histogram["targetFileSize"] == 1 << 20 and histogram["smallFileThreshold"] == 786_432
    assert sum(histogram["counts"]) == doc["files"]["dataFiles"] == 7  # the delete file is not a data file
    root = svg(file_size_chart(doc))
    bars = marks(root, "rect", "bar")
    expected = [
        (c, lo, hi)
        for c, lo, hi in zip(histogram["counts"], histogram["edges"], histogram["edges"][1:], strict=False)
        if c
    ]
    assert [
        (int(b.get("data-count", 0)), int(b.get("data-low", 0)), int(b.get("data-high", 0))) for b in bars
    ] == expected
    assert [b.get("class") for b in bars] == [
        "bar small",
        "bar mixed",
    ]  # 2-4 KiB small; 512 KiB-1 MiB straddles
    heights = [float(b.get("height", 0)) for b in bars]
    assert heights[0] == pytest.approx(heights[1] * 6, rel=0.02)
    target = marks(root, "line", "target")[0]
    threshold = marks(root, "line", "small-threshold")[0]
    mixed_left, mixed_right = (
        float(bars[-1].get("x", 0)),
        float(bars[-1].get("x", 0)) + float(bars[-1].get("width", 0)),
    )
    assert (
        mixed_left
        < float(threshold.get("x1", 0))
        < mixed_right
        < float(target.get("x1", 0))
        <= mixed_right + 2
    )
    assert file_size_chart(doc) == file_size_chart(
        json.loads(json.dumps(doc))
    )  # deterministic, JSON round trip


def test_snapshot_chart_draws_the_retention_cut_between_expirable_and_kept_snapshots() -> None:
    times = [NOW - d * DAY for d in (9, 8, 7, 6, 4, 3, 1, 0)]
    doc = assess(
        inputs([FileFacts("", "data", 1, 5000)], snapshot_count=8, oldest_snapshot_ms=times[0], expirable_snapshots=4,
               snapshot_times_ms=list(reversed(times)))
    ).to_json()  # fmt: skip
    assert doc["snapshots"]["times"] == times  # ascending whatever order the collector gave
    assert (doc["snapshots"]["nowMs"], doc["snapshots"]["retentionMs"], doc["snapshots"]["minRetained"]) == (
        NOW,
        5 * DAY,
        1,
    )
    root = svg(snapshot_chart(doc))
    cut = marks(root, "line", "retention-cut")
    assert len(cut) == 1 and int(cut[0].get("data-time", 0)) == NOW - 5 * DAY
    x_cut = float(cut[0].get("x1", 0))
    dots = marks(root, "circle", "snap")
    assert [int(d.get("data-time", 0)) for d in dots] == times
    assert [d.get("class") for d in dots] == ["snap expirable"] * 4 + ["snap kept"] * 4
    for dot, t in zip(dots, times, strict=True):
        assert (float(dot.get("cx", 0)) < x_cut) == (t < NOW - 5 * DAY), (t, dot.attrib)
    xs = [float(d.get("cx", 0)) for d in dots]
    assert xs == sorted(xs) and float(dots[-1].get("cy", 0)) < float(
        dots[0].get("cy", 0)
    )  # cumulating upward
    younger = snapshot_chart(
        {**doc, "snapshots": {**doc["snapshots"], "retentionMs": 30 * DAY, "expirable": 0}}
    )
    assert not marks(svg(younger), "line", "retention-cut") and "younger than the retention 30 d" in younger


def test_partition_chart_shows_the_worst_partitions_and_escapes_their_values() -> None:
    files = [FileFacts(f"p={i:02d}", "data", 100, 2000) for i in range(30) for _ in range(i % 4 + 1)]
    files += [FileFacts(HOSTILE, "data", 100, 2000) for _ in range(9)]
    files += [FileFacts("p=07", "position-deletes", 60, 300)]
    doc = assess(inputs(files)).to_json()
    text = partition_chart(doc, limit=5)
    assert "<script>" not in text and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&amp;&quot;" in text
    root = svg(text)
    small = marks(root, "rect", "small-files")
    # worst first: p=07 (4/5 small + 0.15/0.1 deletes), the hostile one (9/5), then 4 small files each, by name
    assert [b.get("data-partition") for b in small] == ["p=07", HOSTILE, "p=03", "p=11", "p=15"]
    assert [float(b.get("data-value", 0)) for b in small] == [4, 9, 4, 4, 4]
    assert [b.get("class", "").split()[-1] for b in small] == ["ok", "warn", "ok", "ok", "ok"]
    deletes = marks(root, "rect", "delete-load")
    assert [float(b.get("data-value", 0)) for b in deletes][:2] == [0.15, 0]  # 60 deleted of 400 rows
    assert deletes[0].get("class") == "pbar delete-load warn"
    note = [t for t in root.iter("text") if t.get("class") == "note"]
    assert len(note) == 1 and "5 worst of 31 partitions" in (note[0].text or "")
    assert not marks(root, "rect", "sorted-runs")  # not a primary-key table


def test_charts_degrade_without_files_snapshots_or_partitions() -> None:
    doc = assess(inputs([], snapshot_count=3)).to_json()
    for chart, message in (
        (file_size_chart, "No data files"),
        (partition_chart, "No data files, so no partition"),
        (snapshot_chart, "commit times not collected"),
    ):
        text = chart(doc)
        assert message in text and not marks(svg(text), "rect", "bar"), text
    for chart, message in (
        (file_size_chart, "No data files"),
        (partition_chart, "no partition"),
        (snapshot_chart, "No snapshots"),
    ):
        assert message in chart({})  # a document without the sections
    one = assess(inputs([FileFacts("", "data", 5, 100) for _ in range(6)], primary_key=True)).to_json()
    root = svg(partition_chart(one))
    labels = [t.find("title") for t in root.iter("text") if t.get("class") == "plabel"]
    assert [(t.text, t.tail) for t in labels if t is not None] == [("(unpartitioned)", "(unpartitioned)")]
    assert len(marks(root, "rect", "sorted-runs")) == 1  # a primary-key table shows its sorted runs


def test_report_is_one_self_contained_page_per_table(tmp_path: Path) -> None:
    unhealthy = assess(
        inputs([FileFacts(HOSTILE, "data", 10, 3000) for _ in range(6)], snapshot_count=2, expirable_snapshots=1,
               snapshot_times_ms=[NOW - 6 * DAY, NOW - DAY])
    ).to_json()  # fmt: skip
    healthy = assess(inputs([FileFacts("p=a", "data", 10, 900_000)], table="db.clean")).to_json()
    page = render_report([unhealthy, healthy])
    for outside in ("http://", "https://", "src=", "<script", "url(", "@import", "<link", "<iframe"):
        assert outside not in page.lower(), outside
    assert page.startswith("<!DOCTYPE html>") and page.count('<section class="table" id="table-') == 2
    assert '<a href="#table-1">db.events</a>' in page and '<a href="#table-2">db.clean</a>' in page
    assert page.count("<svg ") == 6 and "<style>" in page
    rec = unhealthy["recommendations"][0]
    for value in (rec["reason"], rec["expected"], rec["metric"], "expire_snapshots"):
        assert value in page
    assert "(threshold 5)" in page and "Nothing to do" in page
    assert "&lt;script&gt;" in page and "<script>" not in page
    assert render_report([unhealthy, healthy]) == page  # deterministic
    written = write_report(unhealthy, tmp_path / "out" / "report.html")
    assert written == tmp_path / "out" / "report.html"
    assert written.read_text(encoding="utf-8") == render_report(unhealthy)
    wrongs: list[Any] = [[], "db.events", [unhealthy, "db.clean"], 42]
    for wrong in wrongs:
        with pytest.raises(UsageError):
            render_report(wrong)


def test_a_real_table_document_draws_its_files_and_snapshots(tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps([{"name": "p", "type": "STRING"}, {"name": "k", "type": "BIGINT"}]))
    root = tmp_path / "t"
    argv = ["create-table", str(root), "--format", "paimon", "--schema", str(schema), "--partition-keys", "p"]
    assert main(argv) == 0
    table = open_table(str(root))
    for i in range(5):
        rows = pa.table({"p": ["a"], "k": pa.array([i], pa.int64())})
        table.writes().write_rows(rows, commit_user="report-test", commit_identifier=i + 1)
    doc = open_table(str(root)).health().to_json()
    assert sum(doc["fileSizes"]["counts"]) == doc["files"]["dataFiles"] == 5
    assert doc["fileSizes"]["edges"][0] <= min(f["averageFileSize"] for f in doc["partitions"])
    times = doc["snapshots"]["times"]
    assert times == sorted(times) and len(times) <= doc["snapshots"]["count"] == 5
    assert all(doc["snapshots"]["nowMs"] >= t for t in times)
    bars = marks(svg(file_size_chart(doc)), "rect", "bar")
    assert sum(int(b.get("data-count", 0)) for b in bars) == 5
    page = render_report(doc)
    assert "compact_data" in page and "https://" not in page
