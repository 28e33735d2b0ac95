"""The Spark jobs' plumbing without a JVM: locating and zipping the code, options, errors, results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat.core import errors
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.sources import WriteSchema
from airflow_lakeformat.spark import runtime
from airflow_lakeformat.spark.jobs import compact_data as compact_job
from airflow_lakeformat.spark.jobs import write as write_job
from airflow_lakeformat.spark.locate import JOB_NAMES, job_path, py_files_zip
from tests.support.spark import FIELDS, isolated_python


def test_job_paths_and_unknown_jobs() -> None:
    assert JOB_NAMES == ("remove_orphan_files", "expire_snapshots", "write", "compact_data")
    for name in JOB_NAMES:
        path = Path(job_path(name))
        assert path.is_absolute() and path.parts[-3:] == ("spark", "jobs", f"{name}.py") and path.is_file()
    with pytest.raises(ValueError, match="unknown Spark job 'vacuum'"):
        job_path("vacuum")


def test_locate_imports_neither_pyspark_nor_airflow() -> None:
    code = (
        "import sys, airflow_lakeformat.spark.locate as l; l.job_path('write'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'airflow', 'py4j')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_py_files_zip_is_reproducible_and_enough_to_import_the_jobs(tmp_path: Path) -> None:
    first = py_files_zip(str(tmp_path / "a"))
    second = py_files_zip(str(tmp_path / "b"))
    assert Path(first).name == "airflow_lakeformat-0.1.0.zip"
    assert Path(first).read_bytes() == Path(second).read_bytes()
    names = zipfile.ZipFile(first).namelist()
    assert "airflow_lakeformat/spark/jobs/write.py" in names and "airflow_lakeformat/py.typed" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["airflow_lakeformat-0.1.0.zip"]  # no temp left
    python = isolated_python(tmp_path)
    code = (
        "import airflow_lakeformat.spark.jobs.compact_data as c, airflow_lakeformat.spark.jobs.write as w; "
        "print(c.__file__); print(w.__file__)"
    )
    isolated = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run(
        [python, "-c", code],
        env={**isolated, "PYTHONPATH": first},
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert found.returncode == 0, found.stderr
    assert all(line.startswith(first + "/") for line in found.stdout.splitlines())
    without = subprocess.run(
        [python, "-c", "import airflow_lakeformat"],
        env=isolated,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert without.returncode != 0 and "No module named 'airflow_lakeformat'" in without.stderr


def test_storage_options_come_from_the_environment_or_a_file(tmp_path: Path) -> None:
    assert runtime.storage_options_from_env({}) == {}
    options = {"key": "k", "secret": "s3cr3t", "client_kwargs": {"endpoint_url": "http://x"}}
    assert runtime.storage_options_from_env({runtime.STORAGE_OPTIONS_ENV: json.dumps(options)}) == options
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    assert runtime.storage_options_from_env({runtime.STORAGE_OPTIONS_FILE_ENV: str(path)}) == options
    with pytest.raises(ValueError, match="not both"):
        runtime.storage_options_from_env(
            {runtime.STORAGE_OPTIONS_ENV: "{}", runtime.STORAGE_OPTIONS_FILE_ENV: str(path)}
        )
    with pytest.raises(ValueError, match="not valid JSON") as bad:
        runtime.storage_options_from_env({runtime.STORAGE_OPTIONS_ENV: '{"secret": "s3cr3t"'})
    assert "s3cr3t" not in str(bad.value)
    with pytest.raises(ValueError, match="must be a JSON object"):
        runtime.storage_options_from_env({runtime.STORAGE_OPTIONS_ENV: "[1]"})
    with pytest.raises(ValueError, match="cannot read"):
        runtime.storage_options_from_env({runtime.STORAGE_OPTIONS_FILE_ENV: str(tmp_path / "missing")})


def test_executors_get_the_drivers_s3_settings_in_their_options() -> None:
    environ = {
        "AWS_ACCESS_KEY_ID": "id",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_SESSION_TOKEN": "token",
        "AWS_ENDPOINT_URL": "http://generic",
        "LAKEFORMAT_S3_ENDPOINT": "http://ours",
        "AWS_REGION": "eu-west-1",
    }
    assert runtime.executor_storage_options("s3://b/t", {}, environ) == {
        "key": "id",
        "secret": "secret",
        "token": "token",
        "endpoint_url": "http://ours",
        "client_kwargs": {"region_name": "eu-west-1"},
    }
    explicit = {"key": "mine", "client_kwargs": {"endpoint_url": "http://e", "region_name": "x"}}
    assert runtime.executor_storage_options("s3a://b/t", explicit, environ) == explicit
    assert runtime.executor_storage_options("/local/t", {"auto_mkdir": True}, environ) == {"auto_mkdir": True}


def test_errors_become_one_line_and_the_cli_exit_codes() -> None:
    cases = [
        (errors.TableNotFoundError("/t"), 3),
        (errors.MissingMetadataError("/t/manifest/m"), 4),
        (errors.UnsupportedFormatError("/t", "x"), 5),
        (errors.SnapshotNotFoundError("no snapshot 9"), 6),
        (errors.CommitConflictError("conflict"), 7),
        (errors.CommitStateUnknownError("unknown"), 8),
        (errors.MaintenanceRefusedError("/t", "too short"), 9),
        (errors.RegisterError("input", "bad\ncolumn"), 11),  # the input does not fit the table
        (OSError("disk"), 1),
    ]
    for exc, code in cases:
        message, got = runtime.describe_error(exc)
        assert got == code and "\n" not in message, (exc, message)
    spark_text = (
        "An error occurred while calling o52.collect.\n: org.apache.spark.SparkException: Job aborted due to "
        "stage failure: ... org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        '  File "/x/write.py", line 3, in f\n    raise X\n'
        "airflow_lakeformat.core.errors.CorruptMetadataError: /t/bucket-0/f.parquet: holds 3 rows\n"
        "\n\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)\n"
    )
    message, code = runtime.describe_error(RuntimeError(spark_text))
    assert (message, code) == (
        "a Spark task failed: CorruptMetadataError: /t/bucket-0/f.parquet: holds 3 rows",
        4,
    )
    message, code = runtime.describe_error(RuntimeError("An error occurred\n: java.lang.OutOfMemoryError"))
    assert (message, code) == ("RuntimeError: An error occurred", 1)


def test_jobs_fail_before_any_spark_session_with_the_exit_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert compact_job.main(["--table", str(tmp_path / "missing")]) == 3
    assert capsys.readouterr().err.startswith("lakeformat-job: error: ")
    pk = create_table(str(tmp_path / "pk"), schema_from_fields(FIELDS, ["dt"], ["dt", "v"]))
    # A primary-key table is compacted (merge-tree), but not one whose compaction must emit a changelog.
    producing = schema_from_fields(FIELDS, ["dt"], ["dt", "v"], {"changelog-producer": "lookup"})
    assert compact_job.main(["--table", create_table(str(tmp_path / "lookup"), producing).root]) == 5
    assert "changelog-producer=lookup" in capsys.readouterr().err
    assert write_job.main(["--table", pk.root, "--source", "x.parquet", "--source-format", "parquet"]) == 11
    assert "cannot add files to a primary-key table" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        write_job.main(["--table", pk.root, "--source", "x", "--source-format", "xml"])
    assert usage.value.code == 2


def test_a_dry_run_plans_without_spark_and_reports_to_stdout_and_the_result_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = create_table(str(tmp_path / "t"), schema_from_fields(FIELDS, ["dt"]))
    result_path = tmp_path / "out" / "result.json"
    assert compact_job.main(["--table", table.root, "--dry-run", "--result", str(result_path)]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith(runtime.RESULT_PREFIX)
    document = json.loads(line[len(runtime.RESULT_PREFIX) :])
    assert document == json.loads(result_path.read_text())
    assert (document["job"], document["mode"], document["dryRun"], document["groups"]) == (
        "compact_data",
        "spark",
        True,
        0,
    )
    assert document["plan"]["snapshotId"] is None and "durationSeconds" in document


def test_python_side_source_reading(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "nested").mkdir(parents=True)
    pq.write_table(pa.table({"v": [1, 2]}), source / "a.parquet")
    pq.write_table(pa.table({"v": [3]}), source / "nested" / "b.parquet")
    (source / "_SUCCESS").write_text("")
    (source / ".hidden.parquet").write_text("")
    (source / "notes.txt").write_text("")
    found = write_job.list_source_files(str(source), "parquet", {})
    assert found == [str(source / "a.parquet"), str(source / "nested" / "b.parquet")]
    assert write_job.list_source_files(str(source / "a.parquet"), "parquet", {}) == [
        str(source / "a.parquet")
    ]
    with pytest.raises(errors.RegisterError, match="no csv files"):
        write_job.list_source_files(str(source), "csv", {})
    with pytest.raises(errors.RegisterError, match="does not exist"):
        write_job.list_source_files(str(tmp_path / "nope"), "csv", {})
    # The tasks read with the table's types (core.sources): text parsed as its column, nothing inferred.
    schema = WriteSchema(pa.schema([("s", pa.string()), ("v", pa.int64())]))
    csv = tmp_path / "x.csv"
    csv.write_text("s,v\n0042,7\n,8\n")
    [data] = list(write_job._read_file(str(csv), "csv", {}, schema))
    assert data.to_pylist() == [{"s": "0042", "v": 7}, {"s": None, "v": 8}]
    jsonl = tmp_path / "x.jsonl"
    jsonl.write_text('{"s": "a", "v": 1}\n{"s": null, "v": 2}\n')
    [data] = list(write_job._read_file(str(jsonl), "json", {}, schema))
    assert data.to_pylist() == [{"s": "a", "v": 1}, {"s": None, "v": 2}]
    batches = list(write_job._read_file(str(source / "a.parquet"), "parquet", {}, schema))
    assert sum(b.num_rows for b in batches) == 2 and all(b.schema == schema.arrow for b in batches)


def test_the_default_reader_and_the_python_readers_plan(tmp_path: Path) -> None:
    import argparse

    flat = tmp_path / "flat"
    flat.mkdir()
    for name, rows in (("a", 30), ("b", 10), ("c", 20)):
        pq.write_table(pa.table({"v": list(range(rows))}), flat / f"{name}.parquet", row_group_size=10)
    hive = tmp_path / "hive" / "dt=2024-01-01"
    hive.mkdir(parents=True)
    pq.write_table(pa.table({"v": [1]}), hive / "part-0.parquet")

    def reads_with_spark(source: Path | str, fmt: str = "parquet", reader: str = "auto") -> bool:
        args = argparse.Namespace(source=str(source), source_format=fmt, source_reader=reader)
        return write_job.spark_reads(args, {})

    # Local Parquet: pyarrow in the tasks, unless Hive-style directories make columns (Spark reads those).
    assert not reads_with_spark(flat) and not reads_with_spark(f"file://{flat}")
    assert reads_with_spark(tmp_path / "hive")
    assert reads_with_spark(flat, "csv") and not reads_with_spark("s3://b/in", "csv")
    assert reads_with_spark(flat, reader="spark") and not reads_with_spark(flat / "x.csv", "csv", "python")

    files = write_job.source_files(str(flat), "parquet", {})
    # As many files as tasks or more: whole files, balanced by bytes, each task in source order.
    shares = write_job.plan_source_units(files, "parquet", 2, {})
    assert sorted(unit[0] for share in shares for unit in share) == sorted(f[0] for f in files)
    assert all(unit[2] is None for share in shares for unit in share)
    assert {tuple(Path(u[0]).name for u in share) for share in shares} == {
        ("a.parquet",),
        ("b.parquet", "c.parquet"),
    }
    # Fewer files than tasks: cut into row groups, so every task gets rows.
    [(path, size, _)] = write_job.source_files(str(flat / "a.parquet"), "parquet", {})
    shares = write_job.plan_source_units([(path, size, "a.parquet")], "parquet", 2, {})
    assert sorted(u[2] for share in shares for u in share) == [(0,), (1,), (2,)] and all(shares)
    only_v = WriteSchema(pa.schema([("v", pa.int64())]))
    rows = [
        sum(t.num_rows for u in share for t in write_job._read_file(u[0], "parquet", {}, only_v, u[2]))
        for share in shares
    ]
    assert sorted(rows) == [10, 20]
