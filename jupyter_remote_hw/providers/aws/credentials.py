"""Whether the AWS credential chain finds credentials, said in words with what to do.

The check reads what boto3 reads (environment, ``~/.aws``, SSO cache, container and
instance roles) without calling AWS; its answer is kept for a few seconds, so listing
hardware stays fast while a fix (``aws configure``) shows up at the next listing.
"""

from __future__ import annotations

import os
import threading
import time

from ..usability import Unusable

#: Seconds an answer is reused.
CHECK_TTL = 15.0
#: The variables that change the answer at once.
_ENV = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
)

NO_CREDENTIALS = Unusable(
    "no credentials", "set AWS_PROFILE or run `aws configure`", ("aws configure",)
)

_lock = threading.Lock()
_answers: dict[tuple[str | None, ...], tuple[float, Unusable | None]] = {}


def _check() -> Unusable | None:
    import boto3
    from botocore.exceptions import BotoCoreError, ProfileNotFound

    try:
        credentials = boto3.session.Session().get_credentials()
    except ProfileNotFound as exc:
        profile = str(getattr(exc, "kwargs", {}).get("profile") or os.environ.get("AWS_PROFILE"))
        return Unusable(
            f"no AWS profile named {profile!r}",
            f"run `aws configure --profile {profile}`, or set AWS_PROFILE to one in ~/.aws/config",
            (f"aws configure --profile {profile}",),
        )
    except BotoCoreError as exc:
        return Unusable(
            "the credentials cannot be read",
            f"{str(exc).rstrip('.')}; fix ~/.aws/config or run `aws configure`",
            ("aws configure",),
        )
    if credentials is None:
        return NO_CREDENTIALS
    return None


def credentials_status() -> Unusable | None:
    """None when the AWS credential chain finds credentials, else why not and what to do."""
    key = tuple(os.environ.get(name) for name in _ENV)
    now = time.monotonic()
    with _lock:
        known = _answers.get(key)
        if known is not None and now - known[0] < CHECK_TTL:
            return known[1]
    answer = _check()
    with _lock:
        _answers[key] = (now, answer)
    return answer


def forget() -> None:
    """Check again at the next call (after the credentials changed)."""
    with _lock:
        _answers.clear()


__all__ = ["NO_CREDENTIALS", "credentials_status", "forget"]
