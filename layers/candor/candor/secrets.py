"""API keys for the hosted backends: from settings, or from SSM Parameter Store.

On Lambda the template passes only the *name* of an SSM SecureString parameter,
so the key never sits in the template, the stack or the function's environment.
It is read once per process (one GetParameter per cold start) and kept in memory.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from pydantic import SecretStr

from candor.errors import ConfigurationError

if TYPE_CHECKING:
    from mypy_boto3_ssm import SSMClient

_cache: dict[str, str] = {}
_lock = threading.Lock()


def api_key(
    service: str,
    *,
    direct: SecretStr | None,
    parameter: str | None,
    environment: str,
    region: str | None = None,
    ssm: SSMClient | None = None,
) -> str:
    """The key for `service`: the setting, else the SSM parameter, else `environment`.

    `service` is the settings prefix ("openai", "pinecone"), used in messages.
    """
    if direct is not None and direct.get_secret_value():
        return direct.get_secret_value()
    if parameter:
        return ssm_secure_string(parameter, region=region, client=ssm)
    from_env = os.environ.get(environment)
    if from_env:
        return from_env
    upper = service.upper()
    raise ConfigurationError(
        f"no {service} API key: set CANDOR_{upper}_API_KEY, or CANDOR_{upper}_API_KEY_PARAMETER "
        f"to the name of an SSM SecureString parameter, or {environment}"
    )


def ssm_secure_string(
    name: str, *, region: str | None = None, client: SSMClient | None = None
) -> str:
    """The decrypted value of an SSM parameter, fetched once per process."""
    with _lock:
        cached = _cache.get(name)
        if cached is not None:
            return cached
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        ssm = client or boto3.client("ssm", region_name=region)
        try:
            response = ssm.get_parameter(Name=name, WithDecryption=True)
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "error")
            raise ConfigurationError(f"cannot read SSM parameter {name}: {code}") from e
        except BotoCoreError as e:
            raise ConfigurationError(f"cannot read SSM parameter {name}: {e}") from e
        value = response["Parameter"].get("Value", "")
        if not value.strip():
            raise ConfigurationError(f"SSM parameter {name} is empty")
        _cache[name] = value.strip()
        return _cache[name]


def forget() -> None:
    """Drop the cached values (tests; a key rotated without a new deployment)."""
    with _lock:
        _cache.clear()
