"""Make pyiceberg's FileIO read the same store as the core's fsspec :class:`~airflow_lakeformat.core.io.FileIO`.

The core opens ``s3://`` with fsspec storage options (``key``, ``secret``, ``token``, ``endpoint_url``,
``client_kwargs.endpoint_url``/``region_name``, plus the ``LAKEFORMAT_S3_ENDPOINT``/``AWS_ENDPOINT_URL*``
and ``AWS_REGION`` environment variables, see ``core/io.py`` ``_with_s3_defaults``). pyiceberg opens the
manifests and data files it reads itself through its own FileIO (pyarrow's ``S3FileSystem`` by default),
configured by catalog properties (``s3.endpoint``, ``s3.access-key-id``, ...; pyiceberg ``io/__init__.py``).
:func:`pyiceberg_io_properties` maps one onto the other.

A pyiceberg-specific trap: without ``s3.region`` its pyarrow FileIO asks AWS where the bucket lives
(``_cached_resolve_s3_region``), which fails or stalls against S3-compatible servers. We therefore always
set a region for ``s3://`` (the configured one, else ``us-east-1``, which S3-compatible servers accept).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from airflow_lakeformat.core.io import S3_ENDPOINT_VARIABLES

DEFAULT_S3_REGION = "us-east-1"


def _protocol_of(uri: str) -> str:
    return uri.split("://", 1)[0].lower() if "://" in uri else "file"


def pyiceberg_io_properties(
    uri: str,
    storage_options: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """pyiceberg FileIO properties equivalent to fsspec ``storage_options`` for ``uri``.

    Args:
        uri: The table location or metadata file (only its scheme matters).
        storage_options: fsspec options as the CLI parses them (``core.io.parse_storage_options``).
        environ: Environment to read endpoint/region defaults from (``os.environ`` if omitted).

    Returns:
        String properties for ``pyiceberg.io.load_file_io`` / a catalog; empty for local paths.

    Example:
        >>> pyiceberg_io_properties("s3://b/t", {"key": "k", "secret": "s", "endpoint_url": "http://h:1"}, {})
        {'s3.access-key-id': 'k', 's3.secret-access-key': 's', 's3.endpoint': 'http://h:1', 's3.region': 'us-east-1'}
    """
    environ = os.environ if environ is None else environ
    options = dict(storage_options or {})
    if _protocol_of(uri) not in ("s3", "s3a"):
        return {}
    client_kwargs: Mapping[str, Any] = options.get("client_kwargs") or {}
    props: dict[str, str] = {}
    if options.get("key"):
        props["s3.access-key-id"] = str(options["key"])
    if options.get("secret"):
        props["s3.secret-access-key"] = str(options["secret"])
    token = options.get("token") or options.get("session_token")
    if token:
        props["s3.session-token"] = str(token)
    endpoint = options.get("endpoint_url") or client_kwargs.get("endpoint_url")
    if not endpoint:
        endpoint = next((environ[v] for v in S3_ENDPOINT_VARIABLES if environ.get(v)), None)
    if endpoint:
        props["s3.endpoint"] = str(endpoint)
    region = (
        options.get("region")
        or client_kwargs.get("region_name")
        or environ.get("AWS_REGION")
        or environ.get("AWS_DEFAULT_REGION")
        or DEFAULT_S3_REGION
    )
    props["s3.region"] = str(region)
    if options.get("anon"):
        props["s3.anonymous"] = "true"
    style = ((options.get("config_kwargs") or {}).get("s3") or {}).get("addressing_style")
    if style in ("virtual", "path"):
        props["s3.force-virtual-addressing"] = "true" if style == "virtual" else "false"
    return props


def storage_options_from_properties(properties: Mapping[str, str]) -> dict[str, Any]:
    """The inverse mapping: fsspec storage options from pyiceberg/catalog ``s3.*`` properties.

    Used when a table comes from a catalog configured with pyiceberg properties, so that the core's
    FileIO (listings, exclusive creates) reaches the same store as pyiceberg.

    Args:
        properties: Catalog or FileIO properties (``s3.endpoint``, ``s3.access-key-id``, ...).

    Returns:
        fsspec storage options (empty if no ``s3.*`` property is set).
    """
    options: dict[str, Any] = {}
    client_kwargs: dict[str, Any] = {}
    if properties.get("s3.access-key-id"):
        options["key"] = properties["s3.access-key-id"]
    if properties.get("s3.secret-access-key"):
        options["secret"] = properties["s3.secret-access-key"]
    if properties.get("s3.session-token"):
        options["token"] = properties["s3.session-token"]
    if properties.get("s3.endpoint"):
        client_kwargs["endpoint_url"] = properties["s3.endpoint"]
    if properties.get("s3.region"):
        client_kwargs["region_name"] = properties["s3.region"]
    if client_kwargs:
        options["client_kwargs"] = client_kwargs
    if str(properties.get("s3.anonymous", "")).lower() == "true":
        options["anon"] = True
    return options
