"""The "Table health" UI page in a real browser and ``lakeformat_auto_maintenance`` on the compose stack.

``test_compose_runtime.py`` calls :func:`health_page_and_auto_maintenance` once the example DAGs have run,
with the stack's services up and the ``lakeformat_default`` connection created through the REST API. It

1. writes a third table into the stack's S3 warehouse, ``demo.small_files`` (Paimon, eight one-file commits
   in one partition: ``health`` recommends ``compact_data``), next to the examples' ``demo.events`` and
   ``demo.events_iceberg``, and computes each table's health in this process (the expectation);
2. opens the Airflow UI in Debian's headless Chromium (selenium driving ``/usr/bin/chromedriver``; the
   selenium-manager is offline, nothing is downloaded), clicks the plugin's "Table health" entry in the
   navigation and, inside the page the UI frames, checks what a person sees: each table with its score, its
   three SVG charts, its recommendations' text, and the link to the manual-maintenance DAG's trigger form
   with the table filled in; the screenshot goes to a temporary file (and to ``LAKEFORMAT_UI_SCREENSHOT``
   when set, which is how ``docs/images/ui-health.png`` is made); then follows that link and finds the
   form's *Table* field holding the table;
3. unpauses and triggers ``lakeformat_auto_maintenance`` over the three tables and checks its ``summary``:
   each table ran exactly the operations its health recommended (none for a healthy one) and
   ``demo.small_files`` no longer needs compaction afterwards.

The browser starts in a thread while the table is written (:func:`start_browser`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.airflow.compose_dag_runs import finished, trigger, xcom

if TYPE_CHECKING:
    from tests.airflow.test_compose_runtime import Stack

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
UI_TABLE = "demo.small_files"
AUTO_MAINTENANCE = "lakeformat_auto_maintenance"
MANUAL_MAINTENANCE = "lakeformat_manual_maintenance"
NAV_NAME = "Table health"
TABLES = ("demo.events", "demo.events_iceberg", UI_TABLE)


# -- the tables -----------------------------------------------------------------------------------------


def warehouse_of(connection: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The warehouse root and its storage options, as the connection gives them to the services."""
    from airflow_lakeformat.hooks.lakeformat import LakeformatConnectionSettings

    settings = LakeformatConnectionSettings.from_connection(
        "lakeformat_default",
        connection["host"],
        connection.get("login"),
        connection.get("password"),
        connection.get("extra") or {},
    )
    assert settings.root is not None
    return settings.root, settings.storage_options(settings.root)


def table_uri(root: str, name: str) -> str:
    database, table = name.split(".")
    return f"{root}/{database}.db/{table}"


def write_small_files_table(connection: dict[str, Any]) -> None:
    """``demo.small_files``: eight commits of 3 rows into one partition (8 small files: compact_data)."""
    from tests.airflow.helpers import append, make_table

    root, options = warehouse_of(connection)
    table = make_table(table_uri(root, UI_TABLE), options)
    for _ in range(8):
        append(table, 3)


def health_documents(connection: dict[str, Any]) -> dict[str, dict[str, Any]]:
    from airflow_lakeformat.core.tables import open_table

    root, options = warehouse_of(connection)
    return {
        name: open_table(table_uri(root, name), storage_options=options).health().to_json() for name in TABLES
    }


# -- the browser ----------------------------------------------------------------------------------------


def require_chromium() -> None:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if not missing:
        return
    message = (
        f"no {' and '.join(missing)} (Debian's chromium and chromium-driver; scripts/setup.sh installs them)"
    )
    if os.environ.get("LAKEFORMAT_SKIP_CHROMIUM") == "1":
        pytest.skip(f"{message}; LAKEFORMAT_SKIP_CHROMIUM=1")
    pytest.fail(f"{message}, or set LAKEFORMAT_SKIP_CHROMIUM=1 to skip the UI check")


def new_driver(profile: Path) -> Any:
    """Headless Chromium through Debian's chromedriver; selenium-manager offline (never downloads)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)


@contextlib.contextmanager
def start_browser() -> Iterator[Any]:
    """A driver started in a thread (about 5 s) while the caller works; yields a function returning it."""
    require_chromium()
    profile = Path(tempfile.mkdtemp(prefix="lakeformat-chromium-"))
    started: dict[str, Any] = {}

    def start() -> None:
        try:
            started["driver"] = new_driver(profile)
        except Exception as exc:  # re-raised in the test's thread
            started["error"] = exc

    thread = threading.Thread(target=start, daemon=True)
    thread.start()

    def driver() -> Any:
        thread.join(120)
        if "error" in started:
            raise started["error"]
        return started["driver"]

    try:
        yield driver
    finally:
        thread.join(120)
        if "driver" in started:
            started["driver"].quit()
        shutil.rmtree(profile, ignore_errors=True)


def open_health_page(driver: Any, base_url: str) -> Any:
    """The UI's home page, then the plugin's entry in the navigation; returns the framed page's iframe."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, 120)
    driver.get(base_url + "/")
    nav = wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, f"a[aria-label='{NAV_NAME}']")))
    nav.click()
    wait.until(ec.url_contains("/plugin/"))
    frame = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, f"iframe[title='{NAV_NAME}']")))
    driver.switch_to.frame(frame)
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "section.table")))
    return frame


def check_what_a_person_sees(driver: Any, documents: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each table's section: score, three visible SVG charts, recommendations; returns the trigger links."""
    from selenium.webdriver.common.by import By

    sections = {
        s.get_attribute("data-table"): s for s in driver.find_elements(By.CSS_SELECTOR, "section.table")
    }
    assert set(sections) == set(TABLES), list(sections)
    links = {}
    for name, section in sections.items():
        document = documents[name]
        score = section.find_element(By.CSS_SELECTOR, ".head .score")
        assert score.text == str(document["score"]), (name, score.text, document["score"])
        charts = section.find_elements(By.CSS_SELECTOR, ".charts svg")
        assert len(charts) == 3 and all(c.is_displayed() and c.size["height"] > 50 for c in charts), name
        text = section.text
        if document["recommendations"]:
            for recommendation in document["recommendations"]:
                assert recommendation["operation"] in text and recommendation["reason"] in text, name
        else:
            assert "Healthy: no maintenance needed." in text, name
        links[name] = section.find_element(By.CSS_SELECTOR, "a.trigger").get_attribute("href")
    return links


def ui_check(stack: Stack, driver: Any, documents: dict[str, dict[str, Any]]) -> Path:
    """Steps 2 of the module's scenario; returns the screenshot."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    base_url = f"http://127.0.0.1:{stack.ports[('airflow-api-server', 8080)]}"
    open_health_page(driver, base_url)
    links = check_what_a_person_sees(driver, documents)
    for name, href in links.items():
        assert href == (
            f"{base_url}/lakeformat/trigger?dag_id={MANUAL_MAINTENANCE}&table={name}&conn_id=lakeformat_default"
        ), href
    driver.switch_to.default_content()
    screenshot = stack.home / "ui-health.png"
    assert driver.save_screenshot(str(screenshot))
    if os.environ.get("LAKEFORMAT_UI_SCREENSHOT"):
        shutil.copyfile(screenshot, os.environ["LAKEFORMAT_UI_SCREENSHOT"])
    # The link opens the manual-maintenance DAG's form (its Params, from the serialized DAG) with the table.
    driver.switch_to.frame(driver.find_element(By.CSS_SELECTOR, f"iframe[title='{NAV_NAME}']"))
    driver.find_element(By.CSS_SELECTOR, f"section[data-table='{UI_TABLE}'] a.trigger").click()
    field = WebDriverWait(driver, 60).until(ec.presence_of_element_located((By.ID, "p-table")))
    assert field.get_attribute("value") == UI_TABLE
    assert driver.find_element(By.ID, "p-dry_run").is_selected(), "the form keeps the dry run default"
    assert MANUAL_MAINTENANCE in driver.find_element(By.TAG_NAME, "h1").text
    driver.switch_to.default_content()
    return screenshot


# -- automatic maintenance -----------------------------------------------------------------------------


def auto_maintenance(stack: Stack, documents: dict[str, dict[str, Any]], connection: dict[str, Any]) -> None:
    """Step 3: every table ran exactly what its health recommended, and small_files is compacted."""
    stack.api("PATCH", f"dags/{AUTO_MAINTENANCE}", {"is_paused": False})
    run_id = trigger(stack, AUTO_MAINTENANCE, {"conn_id": "lakeformat_default", "tables": list(TABLES)})
    finished(stack, AUTO_MAINTENANCE, run_id)
    summary = xcom(stack, AUTO_MAINTENANCE, run_id, "summary")
    assert set(summary) == set(TABLES), summary
    for name, document in documents.items():
        wanted = [r["operation"] for r in document["recommendations"]]
        assert summary[name]["score"] == document["score"], (name, summary[name])
        assert summary[name]["ran"] == wanted, (name, summary[name], wanted)
    assert "compact_data" in summary[UI_TABLE]["ran"]
    after = health_documents(connection)[UI_TABLE]
    assert "compact_data" not in [r["operation"] for r in after["recommendations"]], after


def health_page_and_auto_maintenance(stack: Stack, connection: dict[str, Any]) -> dict[str, float]:
    """The whole scenario of this module; returns the seconds each part took (the test prints them)."""
    times: dict[str, float] = {}
    started = time.monotonic()
    # The page shows every lakeformat connection: drop the one another test made (an S3 host on AWS itself).
    assert stack.request("DELETE", "connections/ui_made")[0] in (204, 404)
    with start_browser() as driver:
        write_small_files_table(connection)
        documents = health_documents(connection)
        times["tables"] = time.monotonic() - started
        screenshot = ui_check(stack, driver(), documents)
        times["ui"] = time.monotonic() - started - times["tables"]
    print(f"UI screenshot: {screenshot}")
    mark = time.monotonic()
    auto_maintenance(stack, documents, connection)
    times["auto_maintenance"] = time.monotonic() - mark
    return times
