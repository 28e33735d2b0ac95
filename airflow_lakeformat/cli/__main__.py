"""``python -m airflow_lakeformat.cli``: the ``lakeformat`` command."""

import sys

from airflow_lakeformat.cli import main

sys.exit(main())
