"""The provider's Airflow 3 UI plugin: a "Table health" page in the Airflow UI's navigation.

``health_ui.LakeformatHealthPlugin`` (registered through the provider info's ``plugins`` entry and the
``airflow.plugins`` entry point) mounts the FastAPI app of ``health_app.py`` at ``/lakeformat`` in the
api-server and adds a nav entry that shows it in the UI. ``health_tables.py`` finds the tables of the
configured ``lakeformat`` connections and computes their health through the hook and the facade;
``health_page.py`` renders the page (server-side HTML, inline CSS and SVG charts, nothing fetched).
This package is part of the Airflow layer: it imports hooks and the facade (``core.tables``), never a
format package and never pyspark (``lint-imports``).
"""
