"""Keys and secrets: the hosted backends' API keys, the server keys and the session key.

Each comes from a setting, or from SSM Parameter Store; the session key of the
embedded default is generated once into the data folder.

On Lambda the template passes only the *name* of an SSM SecureString parameter,
so the key never sits in the template, the stack or the function's environment.
It is read when first needed and kept in memory for the life of the process. A
failed read is remembered for FAILED_READ_BACKOFF_SECONDS: until then the same
error is raised without calling SSM, so a missing parameter costs one GetParameter
per backoff, not one per request (GetParameter has an account-wide rate limit).
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import SecretStr

from candor.errors import ConfigurationError

if TYPE_CHECKING:
    from mypy_boto3_ssm import SSMClient

    from candor.settings import Settings

# How long a failed read of a parameter is answered from memory before SSM is asked again.
FAILED_READ_BACKOFF_SECONDS = 10.0

_cache: dict[str, str] = {}
# A parameter whose read failed: when, and the error to raise again until the backoff ends.
_failed: dict[str, tuple[float, str]] = {}
_lock = threading.Lock()
_clock = time.monotonic  # replaced by tests


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


def optional_secret(
    *,
    direct: SecretStr | None,
    parameter: str | None,
    region: str | None = None,
    ssm: SSMClient | None = None,
) -> str | None:
    """The setting's value, else the SSM parameter's; None when neither is configured."""
    if direct is not None and direct.get_secret_value().strip():
        return direct.get_secret_value().strip()
    if parameter:
        return ssm_secure_string(parameter, region=region, client=ssm)
    return None


# The embedded default's session key, in the data folder.
SESSION_SECRET_FILE = "session-secret"


def session_secret(settings: Settings) -> str:
    """The deployment's secret: CANDOR_SESSION_SECRET, its SSM parameter, or a key
    generated into the data folder. It signs session ids (candor.api.sessions) and
    keys the caches' digests when questions are not stored (candor.question_keys)."""
    return optional_secret(
        direct=settings.session_secret,
        parameter=settings.session_secret_parameter,
        region=settings.aws_region,
    ) or generated_secret(settings.data_dir / SESSION_SECRET_FILE)


def generated_secret(path: Path) -> str:
    """A random key made once into `path` (mode 0600) and read from it afterwards.

    For the embedded default, where there is no parameter store: every process
    sharing the data folder signs with the same key, and a restart keeps sessions.
    """
    try:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            # Written whole under a private name, then linked into place: of two
            # processes starting at once, one key wins and neither reads half a file.
            draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
            fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                with os.fdopen(fd, "w") as file:
                    file.write(secrets.token_urlsafe(32))
                os.link(draft, path)
            except FileExistsError:
                pass
            finally:
                draft.unlink()
        value = path.read_text().strip()
    except OSError as e:
        raise ConfigurationError(f"cannot keep a generated key in {path}: {e}") from e
    if not value:
        raise ConfigurationError(f"{path} is empty: delete it and a new key is generated")
    return value


def ssm_secure_string(
    name: str, *, region: str | None = None, client: SSMClient | None = None
) -> str:
    """The decrypted value of an SSM parameter, fetched once per process.

    A failure is raised again from memory for FAILED_READ_BACKOFF_SECONDS.
    """
    with _lock:
        cached = _cache.get(name)
        if cached is not None:
            return cached
        failed = _failed.get(name)
        if failed is not None and _clock() - failed[0] < FAILED_READ_BACKOFF_SECONDS:
            raise ConfigurationError(f"{failed[1]} (not asked again for a few seconds)")
        try:
            value = _read(name, region=region, client=client)
        except ConfigurationError as e:
            _failed[name] = (_clock(), str(e))
            raise
        _failed.pop(name, None)
        _cache[name] = value
        return value


def _read(name: str, *, region: str | None, client: SSMClient | None) -> str:
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
    return value.strip()


def forget() -> None:
    """Drop the cached values and failures (tests; a key rotated without a new deployment)."""
    with _lock:
        _cache.clear()
        _failed.clear()
