"""Health policies (issue 28 point 3): thresholds and the operations allowed, with defaults -> namespace ->
table inheritance over the table's own ``lakeformat.health.*`` properties; each refusal names the key path;
recommendations a policy does not allow are suppressed and listed; the CLI's ``--policy`` and ``--html``.

Fast on purpose: one Iceberg table per module (one write: one small file) and a copy of the pypaimon sample;
``health`` only reads metadata, so the tests share them and change nothing.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_lakeformat.cli import EXIT_USAGE, main
from airflow_lakeformat.core.errors import PolicyError, UsageError
from airflow_lakeformat.core.health.policy import HealthPolicy, TableKey, applied_policy
from airflow_lakeformat.core.health.thresholds import Thresholds
from airflow_lakeformat.core.tables import IcebergLakeTable, open_table

POLICY = {
    "defaults": {"thresholds": {"min-small-files": 8, "delete-ratio": 0.2}, "operations": ["compact_data"]},
    "namespaces": {
        "db": {"thresholds": {"min-small-files": 6, "max-small-manifests": 40}},
        "db.sub": {"thresholds": {"min-small-files": 4}, "operations": ["expire_snapshots"]},
    },
    "tables": {"db.events": {"thresholds": {"min-small-files": 2}, "operations": []}},
}


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out)
    return code, out.getvalue()


# -- inheritance -----------------------------------------------------------------------------------------


def test_defaults_then_namespaces_outer_first_then_the_table_each_key_overriding_its_parent() -> None:
    policy = HealthPolicy.load(POLICY)
    base = Thresholds.resolve(
        {"lakeformat.health.min-small-files": "3", "lakeformat.health.max-sorted-runs": "9"}
    )

    table = policy.resolve(TableKey("db", "events"), base)
    assert (table.thresholds.min_small_files, table.thresholds.max_small_manifests) == (2, 40)
    assert table.thresholds.delete_ratio == 0.2  # from defaults, untouched below
    assert table.thresholds.max_sorted_runs == 9  # the table property, no policy level names it
    assert table.operations == () and table.rule == "/tables/db.events/operations"
    assert table.levels == ("/defaults", "/namespaces/db", "/tables/db.events")

    other = policy.resolve(TableKey("db", "clicks"), base)
    assert other.thresholds.min_small_files == 6 and other.operations == ("compact_data",)
    assert other.rule == "/defaults/operations"

    nested = policy.resolve(TableKey("db.sub", "t"), base)  # db, then db.sub
    assert (nested.thresholds.min_small_files, nested.thresholds.max_small_manifests) == (4, 40)
    assert nested.operations == ("expire_snapshots",)

    elsewhere = policy.resolve(TableKey("web", "t"), base)
    assert elsewhere.thresholds.min_small_files == 8 and elsewhere.levels == ("/defaults",)


def test_the_table_property_lists_the_operations_and_a_policy_level_replaces_it() -> None:
    properties = {"lakeformat.health.operations": "expire_snapshots, compact_manifests"}
    only_property = applied_policy(None, TableKey("db", "t"), Thresholds(), properties)
    assert only_property is not None
    assert only_property.operations == ("expire_snapshots", "compact_manifests")
    assert only_property.rule == "table property lakeformat.health.operations"
    assert applied_policy(None, TableKey("db", "t"), Thresholds(), {}) is None

    thresholds_only = HealthPolicy.load({"defaults": {"thresholds": {"min-orphan-files": 3}}})
    kept = thresholds_only.resolve(TableKey("db", "t"), Thresholds(), properties)
    assert (
        kept.operations == ("expire_snapshots", "compact_manifests") and kept.thresholds.min_orphan_files == 3
    )
    replaced = HealthPolicy.load(POLICY).resolve(TableKey("web", "t"), Thresholds(), properties)
    assert replaced.operations == ("compact_data",)

    with pytest.raises(
        UsageError, match=r"lakeformat.health.operations.*'expire_snapshot' \(did you mean expire_snapshots"
    ):
        applied_policy(None, None, Thresholds(), {"lakeformat.health.operations": "expire_snapshot"})


@pytest.mark.parametrize(
    ("text", "namespace", "name"),
    [
        ("/wh/db.db/events", "db", "events"),  # Paimon: the database directory's .db dropped
        ("s3://lake/wh/db/events/", "db", "events"),  # Iceberg Hadoop layout: the last two parts
        ("file:///wh/db/events/metadata/v3.metadata.json", "db", "events"),
        ("prod:a.b.events", "a.b", "events"),  # a catalog table's display name
        ("db.events", "db", "events"),
    ],
)
def test_a_table_key_from_a_path_or_an_identifier(text: str, namespace: str, name: str) -> None:
    assert TableKey.parse(text) == TableKey(namespace, name)


# -- refusals --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "path", "problem"),
    [
        ({"default": {}}, "/default", "unknown key 'default' (did you mean defaults?)"),
        ({"defaults": {"threshold": {}}}, "/defaults/threshold", "did you mean thresholds?"),
        (
            {"tables": {"db.events": {"thresholds": {"min-small-file": 3}}}},
            "/tables/db.events/thresholds/min-small-file",
            "unknown threshold 'min-small-file' (did you mean min-small-files?)",
        ),
        (
            {"namespaces": {"db": {"thresholds": {"delete-ratio": "high"}}}},
            "/namespaces/db/thresholds/delete-ratio",
            "must be a number",
        ),
        (
            {"defaults": {"thresholds": {"min-small-files": True}}},
            "/defaults/thresholds/min-small-files",
            "must be a number",
        ),
        (
            {"defaults": {"thresholds": {"delete-ratio": 0}}},
            "/defaults/thresholds/delete-ratio",
            "must be positive",
        ),
        (
            {"defaults": {"thresholds": {"min-small-files": -2}}},
            "/defaults/thresholds/min-small-files",
            "must be positive",
        ),
        (
            {"defaults": {"thresholds": {"min-small-files": 2.5}}},
            "/defaults/thresholds/min-small-files",
            "whole number",
        ),
        (
            {"tables": {"db.events": {"operations": ["expire_snapshots", "compact_date"]}}},
            "/tables/db.events/operations/1",
            "unknown operation 'compact_date' (did you mean compact_data?)",
        ),
        (
            {"defaults": {"operations": "compact_data"}},
            "/defaults/operations",
            "expected a list of operations",
        ),
        ({"namespaces": ["db"]}, "/namespaces", "expected a mapping"),
        ({"tables": {"events": {}}}, "/tables/events", "namespace.table"),
        ({"tables": {"db.events": [1]}}, "/tables/db.events", "expected a mapping with thresholds"),
        ({"defaults": {"thresholds": [8]}}, "/defaults/thresholds", "expected a mapping of threshold names"),
    ],
)
def test_an_invalid_policy_is_refused_naming_the_key_path(
    policy: dict[str, Any], path: str, problem: str
) -> None:
    with pytest.raises(PolicyError) as caught:
        HealthPolicy.load(policy)
    message = str(caught.value)
    assert f"{path}: " in message and problem in message, message
    assert isinstance(caught.value, UsageError) and caught.value.path == path


def test_files_and_text_yaml_and_json_and_what_cannot_be_parsed(tmp_path: Path) -> None:
    yaml_file = tmp_path / "policy.yaml"
    yaml_file.write_text(
        "defaults:\n  operations: [expire_snapshots]\ntables:\n  db.events:\n    thresholds:\n      min-small-files: 3\n"
    )
    json_file = tmp_path / "policy.json"
    json_file.write_text(json.dumps(POLICY))
    for source in (yaml_file, str(yaml_file)):
        loaded = HealthPolicy.load(source)
        assert loaded.source == str(yaml_file) and loaded.tables["db.events"].thresholds == {
            "min-small-files": 3
        }
    assert HealthPolicy.load(json_file).namespaces["db.sub"].operations == ("expire_snapshots",)
    assert HealthPolicy.load(json_file.read_text()).source == "<text>"
    assert (
        HealthPolicy.load("tables: {/wh/db.db/events: {operations: []}}").tables["db.events"].operations == ()
    )

    broken = tmp_path / "broken.yaml"
    broken.write_text("defaults:\n  operations: [compact_data\n")
    with pytest.raises(PolicyError, match=rf"{broken}: not valid YAML: .*\(line 3, column 1\)"):
        HealthPolicy.load(broken)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"defaults": {"operations": [}}')
    with pytest.raises(PolicyError, match=rf"{bad_json}: not valid JSON: .*line 1, column 30"):
        HealthPolicy.load(bad_json)
    with pytest.raises(PolicyError, match=r"missing\.yaml: no such file"):
        HealthPolicy.load(str(tmp_path / "missing.yaml"))
    with pytest.raises(PolicyError, match="neither a policy file nor a YAML/JSON mapping"):
        HealthPolicy.load("policy-without-suffix")
    yaml_file.write_text("")
    with pytest.raises(PolicyError, match="is empty"):
        HealthPolicy.load(yaml_file)


# -- on tables -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def iceberg_table(tmp_path_factory: pytest.TempPathFactory) -> IcebergLakeTable:
    """``db.events`` (a Hadoop-layout root ``.../db/events``) with one small data file, whose own properties
    set ``min-small-files`` to 1 (so that file alone asks for compact_data) and allow only expire_snapshots."""
    root = tmp_path_factory.mktemp("policy") / "db" / "events"
    schema = root.parent / "schema.json"
    root.parent.mkdir(parents=True)
    schema.write_text(json.dumps([{"name": "k", "type": "BIGINT"}, {"name": "v", "type": "STRING"}]))
    code, text = run(
        "create-table", str(root), "--format", "iceberg", "--schema", str(schema),
        "--option", "lakeformat.health.min-small-files=1",
        "--option", "lakeformat.health.operations=expire_snapshots",
    )  # fmt: skip
    assert code == 0, text
    table = open_table(str(root))
    assert isinstance(table, IcebergLakeTable)
    rows = pa.table({"k": pa.array([1], pa.int64()), "v": ["a"]})
    table.writes().write_rows(rows, commit_user="policy-test", commit_identifier=1)
    return table


def test_iceberg_the_table_properties_then_the_policy_over_them(iceberg_table: IcebergLakeTable) -> None:
    own = iceberg_table.health().to_json()
    assert own["recommendations"] == [] and own["thresholds"]["min-small-files"] == 1
    assert own["policy"]["source"] == "table property lakeformat.health.operations"
    assert [s["operation"] for s in own["policy"]["suppressed"]] == ["compact_data"]

    allowed = iceberg_table.health(
        policy=HealthPolicy.load({"namespaces": {"db": {"operations": ["compact_data"]}}})
    )
    assert allowed.operations == ["compact_data"] and allowed.score == own["score"]
    assert allowed.to_json()["policy"]["suppressed"] == []

    raised = iceberg_table.health(
        policy=HealthPolicy.load({"tables": {"db.events": {"thresholds": {"min-small-files": 2}}}})
    )
    document = raised.to_json()
    assert raised.operations == [] and document["thresholds"]["min-small-files"] == 2
    assert document["policy"]["suppressed"] == [] and document["policy"]["levels"] == ["/tables/db.events"]
    assert document["policy"]["table"] == "db.events"


def test_paimon_a_namespace_threshold_and_a_table_that_allows_nothing(sample_tables: Path) -> None:
    table = open_table(str(sample_tables / "append_tbl"))
    plain = table.health()
    assert plain.operations == [] and plain.to_json()["policy"] is None

    lowered = table.health(
        policy=HealthPolicy.load({"namespaces": {"db": {"thresholds": {"min-small-files": 1}}}})
    )
    assert lowered.operations == ["compact_data"]
    assert lowered.to_json()["policy"]["operations"] == [
        "compact_data", "compact_deletes", "compact_manifests", "expire_snapshots", "remove_orphan_files",
        "expire_partitions",
    ]  # fmt: skip

    policy = {
        "namespaces": {"db": {"thresholds": {"min-small-files": 1}}},
        "tables": {"db.append_tbl": {"operations": ["expire_snapshots"]}},
    }
    suppressed = table.health(policy=HealthPolicy.load(policy, name="team.yaml")).to_json()
    assert suppressed["recommendations"] == [] and suppressed["score"] == lowered.score
    (entry,) = suppressed["policy"]["suppressed"]
    assert entry["operation"] == "compact_data" and entry["rule"] == "/tables/db.append_tbl/operations"
    assert entry["reason"] == lowered.recommendations[0].reason
    assert suppressed["policy"]["source"] == "team.yaml" and suppressed["policy"]["operations"] == [
        "expire_snapshots"
    ]


# -- the CLI ---------------------------------------------------------------------------------------------


def test_cli_policy_and_html(sample_tables: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = str(sample_tables / "append_tbl")
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "namespaces:\n  db:\n    thresholds: {min-small-files: 1}\ntables:\n  db.append_tbl:\n    operations: []\n"
    )
    html = tmp_path / "report" / "append_tbl.html"
    code, text = run("health", table, "--policy", str(policy), "--html", str(html), "--json")
    assert code == 0, text
    document = json.loads(text)
    assert document["recommendations"] == [] and document["policy"]["source"] == str(policy)
    assert [s["operation"] for s in document["policy"]["suppressed"]] == ["compact_data"]
    page = html.read_text()
    assert page.lstrip().lower().startswith("<!doctype html") and "<svg" in page and "append_tbl" in page

    code, text = run("health", table, "--policy", str(policy))
    assert code == 0 and "suppressed compact_data (/tables/db.append_tbl/operations)" in text, text

    policy.write_text("tables:\n  db.append_tbl:\n    operations: [compact]\n")
    capsys.readouterr()
    code, text = run("health", table, "--policy", str(policy), "--json")
    assert code == EXIT_USAGE
    assert "/tables/db.append_tbl/operations/0: unknown operation 'compact'" in capsys.readouterr().err
    assert json.loads(text)["error"]["type"] == "PolicyError"
