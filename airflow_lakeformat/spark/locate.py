"""Find the Spark job scripts and package the code for clusters, without importing PySpark or Airflow.

The Airflow layer imports this module to build ``spark-submit`` commands, so it must stay free of
both: it computes paths from this file's location and zips the package from disk.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

from airflow_lakeformat.version import __version__

JOB_NAMES = ("remove_orphan_files", "expire_snapshots", "write", "compact_data")

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent
_JOBS_DIR = Path(__file__).resolve().parent / "jobs"
# A fixed timestamp makes the zip's bytes depend on the code only.
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def job_path(name: str) -> str:
    """The absolute path of ``airflow_lakeformat/spark/jobs/<name>.py``, the script to ``spark-submit``."""
    if name not in JOB_NAMES:
        raise ValueError(f"unknown Spark job {name!r} (jobs: {', '.join(JOB_NAMES)})")
    return str(_JOBS_DIR / f"{name}.py")


def _package_files() -> list[Path]:
    files = []
    for directory, subdirectories, names in os.walk(_PACKAGE_ROOT):
        subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__" and not d.startswith("."))
        for name in sorted(names):
            if name.endswith(".py") or name == "py.typed":
                files.append(Path(directory) / name)
    return files


def py_files_zip(target_dir: str) -> str:
    """Zip the ``airflow_lakeformat`` package into ``target_dir`` for ``spark-submit --py-files``.

    Returns the zip's path, ``<target_dir>/airflow_lakeformat-<version>.zip``. The zip holds this
    package only: the cluster's Python needs its dependencies (pyarrow, fastavro, fsspec, and s3fs
    for S3 tables). The file is replaced atomically, so a concurrent submit never reads half a zip.
    """
    os.makedirs(target_dir, exist_ok=True)
    target = os.path.join(target_dir, f"airflow_lakeformat-{__version__}.zip")
    handle, temp = tempfile.mkstemp(prefix=".airflow_lakeformat-", suffix=".zip.tmp", dir=target_dir)
    try:
        with os.fdopen(handle, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in _package_files():
                name = "airflow_lakeformat/" + path.relative_to(_PACKAGE_ROOT).as_posix()
                info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                archive.writestr(info, path.read_bytes())
        os.replace(temp, target)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    return target


__all__ = ["JOB_NAMES", "job_path", "py_files_zip"]
