"""Storage errors as one line: what the object-store client raised, named by its type, with what to check.

botocore (under s3fs) raises its own exception classes for a missing credential, an endpoint it cannot
reach, a refused request or a timeout; none derives from ``OSError``, so without this module they reached
the user as a 40-line traceback. :func:`storage_error` recognises them by their module (``botocore``,
``aiobotocore``, ``s3fs``; nothing is imported to check) and returns the type's name and a message that says
what to check. They exit 1 (any other failure), as an ``OSError`` does; ``--debug`` still shows the traceback.

Example:
    >>> class NoCredentialsError(Exception):
    ...     __module__ = "botocore.exceptions"
    >>> storage_error(NoCredentialsError("Unable to locate credentials"))[0]
    'NoCredentialsError'
"""

from __future__ import annotations

_CLIENT_MODULES = ("botocore", "aiobotocore", "s3fs")

_HINTS = {
    "NoCredentialsError": "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or pass "
    "--storage-option key=... --storage-option secret=...",
    "PartialCredentialsError": "give both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
    "EndpointConnectionError": "check the endpoint (AWS_ENDPOINT_URL, LAKEFORMAT_S3_ENDPOINT or "
    "--storage-option endpoint_url=...) and that the store is running",
    "ConnectTimeoutError": "check the endpoint and the network, or raise "
    "--storage-option config_kwargs.connect_timeout=SECONDS",
    "ReadTimeoutError": "the store did not answer in time; retry, or raise "
    "--storage-option config_kwargs.read_timeout=SECONDS",
}


def storage_error(exc: BaseException) -> tuple[str, str] | None:
    """(type name, one-line message) for an object-store client's error, or None for any other error.

    Args:
        exc: The exception a command raised.
    """
    kind = type(exc)
    if not any(kind.__module__.split(".")[0] == m for m in _CLIENT_MODULES):
        return None
    text = " ".join(str(exc).split()) or kind.__name__
    hint = next((h for name, h in _HINTS.items() if any(c.__name__ == name for c in kind.__mro__)), None)
    return kind.__name__, f"{kind.__name__}: {text}" + (f" ({hint})" if hint else "")
