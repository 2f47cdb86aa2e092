"""A real S3 endpoint for tests: moto's server, on loopback, started once per session.

``s3_server`` (a session fixture, registered in tests/conftest.py) starts
``moto.server.ThreadedMotoServer`` on 127.0.0.1 at a free port and yields an
:class:`S3Server`. Uploads go through boto3, a client independent of the storage seam
under test, so a read that equals the local directory proves the seam, not a round
trip through itself. Skips, saying why, where moto's server extra is not installed.

Credentials are moto's dummies, passed as storage options (never the environment, so a
developer's real AWS settings are neither used nor needed).
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field

import pytest

_buckets = itertools.count()


@dataclass
class S3Server:
    """A running moto S3 server: ``endpoint`` is ``http://127.0.0.1:<port>``."""

    endpoint: str
    client: object = field(repr=False)

    def options(self, **extra) -> dict[str, str]:
        """Storage options (``kafkastore.storage.OPTIONS['s3']``) reaching this server."""
        return {
            "endpoint_override": self.endpoint,
            "access_key": "testing",
            "secret_key": "testing",
            "region": "us-east-1",
            **extra,
        }

    def spark_options(self, **extra) -> dict[str, str]:
        """The same as Spark reader options: ``storage.<name>``."""
        return {f"storage.{k}": str(v) for k, v in self.options(**extra).items()}

    def new_bucket(self, prefix: str = "logs") -> str:
        """A fresh, empty bucket (one per test keeps tests independent)."""
        name = f"{prefix}-{os.getpid()}-{next(_buckets)}"
        self.client.create_bucket(Bucket=name)
        return name

    def upload_dir(self, local_dir, bucket: str, key_prefix: str = "") -> str:
        """Upload every file under ``local_dir`` (recursively) to
        ``s3://bucket/key_prefix/...`` and return that URI."""
        local_dir = os.fspath(local_dir)
        key_prefix = key_prefix.strip("/")
        for root, _dirs, files in os.walk(local_dir):
            for name in files:
                path = os.path.join(root, name)
                rel = os.path.relpath(path, local_dir).replace(os.sep, "/")
                key = f"{key_prefix}/{rel}" if key_prefix else rel
                with open(path, "rb") as f:
                    self.client.put_object(Bucket=bucket, Key=key, Body=f.read())
        return f"s3://{bucket}/{key_prefix}" if key_prefix else f"s3://{bucket}"

    def delete(self, bucket: str, key: str) -> None:
        self.client.delete_object(Bucket=bucket, Key=key)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        out = []
        for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix):
            out.extend(o["Key"] for o in page.get("Contents", ()))
        return sorted(out)


def start_s3_server():
    """Start moto's server on loopback; returns ``(S3Server, stop)``."""
    server_mod = pytest.importorskip(
        "moto.server", reason="moto's server mode is not installed (pip install 'moto[server]')")
    boto3 = pytest.importorskip("boto3", reason="boto3 is not installed (a moto dependency)")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing")
    return S3Server(endpoint=endpoint, client=client), server.stop
