"""The HTTP healthcheck of docker-compose.yaml's services (the image has no curl).

    python /opt/lakeformat/healthcheck.py URL [COMPONENT...]

Exit 0 when URL answers with a 2xx status and, for each COMPONENT named, the JSON body says
``{COMPONENT: {"status": "healthy"}}`` (Airflow's ``/api/v2/monitor/health``); exit 1 otherwise, with the
reason on stderr (``docker inspect`` shows it).
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request


def check(url: str, components: list[str], timeout: float = 10.0) -> str | None:
    """None when healthy, else why not."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = response.read()
    except (urllib.error.URLError, OSError) as exc:  # HTTPError (non-2xx) is a URLError
        return f"{url}: {exc}"
    if not components:
        return None
    try:
        document = json.loads(body)
    except ValueError:
        return f"{url}: the answer is not JSON: {body[:200]!r}"
    for component in components:
        status = (document.get(component) or {}).get("status")
        if status != "healthy":
            return f"{url}: {component} is {status or 'missing'}"
    return None


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    problem = check(argv[0], argv[1:])
    if problem:
        print(problem, file=sys.stderr)
        return 1
    print(f"{argv[0]}: healthy")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
