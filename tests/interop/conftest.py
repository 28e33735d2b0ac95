"""The interop tests (Iceberg against Java) read manifest lists and manifests with the regex scanner from the
first record, as the Iceberg tests do (``tests/iceberg/conftest.py`` says why)."""

from __future__ import annotations

from tests.iceberg.conftest import scan_iceberg_metadata_at_once  # noqa: F401  (an autouse fixture)
