"""Create the warehouse bucket on the compose stack's S3 server (idempotent), waiting until it answers."""

from __future__ import annotations

import os
import sys
import time

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError


def main() -> int:
    bucket = os.environ.get("WAREHOUSE_BUCKET", "warehouse")
    client = boto3.client(
        "s3",
        endpoint_url=os.environ["AWS_ENDPOINT_URL"],
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    deadline = time.monotonic() + 120
    while True:
        try:
            client.create_bucket(Bucket=bucket)
            print(f"created bucket {bucket}")
            return 0
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in (
                "BucketAlreadyOwnedByYou",
                "BucketAlreadyExists",
            ):
                print(f"bucket {bucket} exists")
                return 0
            error: Exception = exc
        except EndpointConnectionError as exc:
            error = exc
        if time.monotonic() > deadline:
            print(f"S3 did not become ready: {error}", file=sys.stderr)
            return 1
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
