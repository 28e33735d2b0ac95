"""A real HTTP proxy in front of the SeaweedFS test server that can answer chosen requests itself.

Throttling cannot be provoked from a server on loopback at will, so tests put this proxy between the
client and SeaweedFS: every request is forwarded unchanged (the ``Host`` header included, so SigV4
signatures stay valid) and SeaweedFS's answer is passed back, except for the requests a rule picks,
which get the answer the rule builds (``503 SlowDown``, or a ``DeleteObjects`` result with per-key
errors) without reaching the server. The client stack (s3fs, aiobotocore, botocore's retries and
parsers) is the real one end to end; only the chosen answers are synthetic.

    with S3Proxy(seaweedfs.endpoint_url, rules=[throttle_deletes(3)]) as proxy:
        options = {**seaweedfs.storage_options(), "client_kwargs": {..., "endpoint_url": proxy.endpoint_url}}
"""

from __future__ import annotations

import http.client
import threading
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
     "transfer-encoding", "upgrade"}
)  # fmt: skip
_S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"


@dataclass
class Request:
    method: str
    path: str  # path and query, as sent
    headers: dict[str, str]
    body: bytes

    @property
    def bucket(self) -> str:
        return urlsplit(self.path).path.lstrip("/").split("/", 1)[0]

    @property
    def is_delete_objects(self) -> bool:
        query = urlsplit(self.path).query
        return self.method == "POST" and "delete" in query.split("&")

    def delete_keys(self) -> list[str]:
        """The keys of a ``DeleteObjects`` request body."""
        root = ET.fromstring(self.body)
        return [node.text or "" for node in root.iter() if node.tag.rsplit("}", 1)[-1] == "Key"]


@dataclass
class Answer:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


# A rule sees each request and returns an answer to send instead of forwarding, or None.
Rule = Callable[[Request], Answer | None]


def error_answer(status: int, code: str, message: str) -> Answer:
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
        f"<RequestId>proxy</RequestId></Error>"
    ).encode()
    return Answer(status, body, {"Content-Type": "application/xml"})


def delete_result_answer(errors: list[tuple[str, str, str]]) -> Answer:
    """A 200 ``DeleteResult`` naming ``(key, code, message)`` as refused (Quiet mode: no ``Deleted``)."""
    items = "".join(
        f"<Error><Key>{key}</Key><Code>{code}</Code><Message>{message}</Message></Error>"
        for key, code, message in errors
    )
    body = f'<?xml version="1.0" encoding="UTF-8"?>\n<DeleteResult xmlns="{_S3_NS}">{items}</DeleteResult>'
    return Answer(200, body.encode(), {"Content-Type": "application/xml"})


def throttle_deletes(count: int | None) -> Rule:
    """Answer the first ``count`` DeleteObjects requests (every one if None) with ``503 SlowDown``."""
    seen = [0]
    lock = threading.Lock()

    def rule(request: Request) -> Answer | None:
        if not request.is_delete_objects:
            return None
        with lock:
            seen[0] += 1
            if count is not None and seen[0] > count:
                return None
        return error_answer(503, "SlowDown", "Please reduce your request rate.")

    return rule


def refuse_keys(count: int | None, code: str, bucket: str | None = None) -> Rule:
    """Answer the first ``count`` DeleteObjects requests (to ``bucket``, if given) with a 200 result
    refusing every key with ``code``; nothing is deleted for those requests."""
    seen = [0]
    lock = threading.Lock()

    def rule(request: Request) -> Answer | None:
        if not request.is_delete_objects or (bucket is not None and request.bucket != bucket):
            return None
        with lock:
            seen[0] += 1
            if count is not None and seen[0] > count:
                return None
        return delete_result_answer([(key, code, f"injected {code}") for key in request.delete_keys()])

    return rule


class S3Proxy:
    """Forwarding proxy on 127.0.0.1 (a free port) with answer-injecting rules; counts what it did."""

    def __init__(self, upstream: str, rules: list[Rule] | None = None) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.rules = list(rules or [])
        self.counts: Counter[str] = Counter()  # "forwarded", "answered", "answered:<status>"
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        # Closing never waits for the request threads: a client that keeps its keep-alive connection open
        # would hold server_close()'s join forever.
        self._server.block_on_close = False
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-proxy", daemon=True)

    @property
    def endpoint_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> S3Proxy:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def _count(self, key: str) -> None:
        with self._lock:
            self.counts[key] += 1

    def answer(self, request: Request) -> Answer:
        for rule in self.rules:
            answer = rule(request)
            if answer is not None:
                self._count("answered")
                self._count(f"answered:{answer.status}")
                return answer
        self._count("forwarded")
        connection = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            connection.putrequest(request.method, request.path, skip_host=True, skip_accept_encoding=True)
            for name, value in request.headers.items():
                if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                    connection.putheader(name, value)
            connection.putheader("Content-Length", str(len(request.body)))
            connection.endheaders(request.body)
            response = connection.getresponse()
            body = response.read()
            headers = {k: v for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP}
            return Answer(response.status, body, headers)
        finally:
            connection.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _relay(self) -> None:
                request = Request(self.command, self.path, dict(self.headers.items()), self._read_body())
                answer = proxy.answer(request)
                self.send_response_only(answer.status)
                headers = {k: v for k, v in answer.headers.items() if k.lower() != "content-length"}
                for name, value in headers.items():
                    self.send_header(name, value)
                if self.command == "HEAD":
                    length = answer.headers.get("Content-Length") or answer.headers.get("content-length")
                    self.send_header("Content-Length", length or "0")
                    self.end_headers()
                    return
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def _read_body(self) -> bytes:
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline().strip():
                                pass  # trailers
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler
