"""A store in an S3 bucket (`s3://bucket[/prefix]`), any S3-compatible server. The
endpoint, region and credentials are boto3's usual ones: AWS_ENDPOINT_URL_S3 or
AWS_ENDPOINT_URL, AWS_REGION (or AWS_DEFAULT_REGION), AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, ~/.aws/config and ~/.aws/credentials). None of
them is printed, recorded or put in an error: a message that would hold a key has it
replaced by ***.

The client is boto3, chosen by benchmarks/s3_clients.py here (an S3 server on loopback,
1,000 objects of 2 kB, median of 3):

| client | install (site-packages) | import | list + get of 1,000 |
|---|---|---|---|
| boto3 1.44 | 46 MB | 436 ms | 3.11 s (16 threads) |
| s3fs 2026.9 (fsspec, aiobotocore) | 61 MB | 302 ms | 3.96 s (its async cat) |
| DuckDB 2.0 httpfs | - | - | not loadable: the extension is downloaded at run time |

DuckDB's httpfs is fetched from DuckDB's own site when first loaded (a lab host may
not reach it), and the pip packages of it are built for DuckDB 1.4, not 2.0; s3fs
bundles aiobotocore on a botocore older than boto3's. boto3 is imported only when an
s3:// store is used. A put is whole or absent (S3 has no partial objects); listing
is one call per 1,000 keys (Delimiter='/' for the runs of a profile).
"""

from __future__ import annotations

import os
from typing import Any

from napilab.harness.errors import InputError, StorageError
from napilab.harness.stores.url import StoreUrl

PARALLEL = 16  # gets at once (botocore's connection pool is sized to match)
_SECRETS = ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN")
_HINT = ("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, "
         "~/.aws/credentials), and AWS_ENDPOINT_URL for a server that is not AWS")


class S3Backend:
    parallel = PARALLEL

    def __init__(self, url: StoreUrl) -> None:
        import boto3
        from botocore.config import Config

        self.url = url
        self.bucket = url.bucket
        self.prefix = f"{url.path}/" if url.path else ""
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        config = Config(max_pool_connections=PARALLEL, retries={"mode": "standard",
                                                                "max_attempts": 3},
                        connect_timeout=10, read_timeout=60,
                        s3={"addressing_style": "path"} if endpoint else {})
        session = boto3.session.Session()
        self._secrets = [os.environ[n] for n in _SECRETS if os.environ.get(n)]
        credentials = session.get_credentials()
        if credentials is None:
            raise InputError(f"{url}: no S3 credentials", hint=_HINT)
        frozen = credentials.get_frozen_credentials()
        self._secrets += [v for v in (frozen.access_key, frozen.secret_key, frozen.token) if v]
        region = session.region_name or "us-east-1"
        self.client: Any = session.client("s3", region_name=region, config=config)

    def describe(self) -> str:
        return str(self.url)

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _error(self, what: str, key: str, exc: Exception) -> StorageError:
        from botocore.exceptions import ClientError, NoCredentialsError

        where = f"s3://{self.bucket}/{self.prefix}{key}"
        if isinstance(exc, NoCredentialsError):
            return StorageError(f"{where}: no S3 credentials", hint=_HINT)
        if isinstance(exc, ClientError):
            error = exc.response.get("Error", {})
            code, message = error.get("Code", "?"), error.get("Message", "")
            hint = _HINT if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch",
                                     "AccessDenied", "403") else ""
            if code == "NoSuchBucket":
                hint = f"create the bucket {self.bucket} first"
            return StorageError(self._scrub(f"{where}: cannot {what}: {code} {message}"),
                                hint=hint)
        return StorageError(self._scrub(f"{where}: cannot {what}: "
                                        f"{str(exc).splitlines()[0] if str(exc) else exc}"))

    def _pages(self, prefix: str, delimiter: str | None) -> list[dict[str, Any]]:
        from botocore.exceptions import BotoCoreError, ClientError

        args = {"Bucket": self.bucket, "Prefix": self.prefix + prefix}
        if delimiter:
            args["Delimiter"] = delimiter
        try:
            return list(self.client.get_paginator("list_objects_v2").paginate(**args))
        except (BotoCoreError, ClientError) as exc:
            raise self._error("list", prefix, exc) from None

    def list_dirs(self, prefix: str) -> list[str]:
        prefix = f"{prefix.rstrip('/')}/" if prefix else ""
        found = [p["Prefix"][len(self.prefix) + len(prefix):].rstrip("/")
                 for page in self._pages(prefix, "/") for p in page.get("CommonPrefixes", [])]
        return sorted(name for name in found if name and not name.startswith("."))

    def list_files(self, prefix: str) -> dict[str, int]:
        prefix = f"{prefix.rstrip('/')}/" if prefix else ""
        return {o["Key"][len(self.prefix):]: int(o["Size"])
                for page in self._pages(prefix, None) for o in page.get("Contents", [])}

    def read(self, key: str) -> bytes | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self.prefix + key)["Body"]
            return bytes(body.read())
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise self._error("read", key, exc) from None
        except BotoCoreError as exc:
            raise self._error("read", key, exc) from None

    def write(self, key: str, data: bytes) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=data)
        except (BotoCoreError, ClientError) as exc:
            raise self._error("write", key, exc) from None

    def close(self) -> None:
        self.client.close()
