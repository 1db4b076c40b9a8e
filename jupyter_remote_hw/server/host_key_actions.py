"""Trusting an SSH host's key from the front end, in one step, as ``jupyter remote-hw trust``
does at a terminal: only the key whose fingerprint the user was shown is recorded."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from ..transport import HostUnreachableError, TransportError, TransportSettings
from ..transport.host_keys import UNKNOWN, KeyMismatchError, trust_seen_key
from .hardware_actions import HardwareRequestError

#: A destination as ssh takes it: an ssh_config alias or host name, optionally user@.
_DESTINATION = re.compile(r"^[A-Za-z0-9_.@%:\[\]-]{1,255}$")
#: A SHA256 fingerprint as ``ssh-keygen -l`` prints it.
_FINGERPRINT = re.compile(r"^SHA256:[A-Za-z0-9+/]{43}=?$")


async def trust_host_key(
    settings: TransportSettings,
    destination: Any,
    fingerprint: Any,
    log: logging.Logger | None = None,
) -> dict[str, Any]:
    """Record the key ``destination`` presents in known_hosts, if it is ``fingerprint``.

    Returns:
        ``{"destination", "host", "port", "fingerprint", "algorithm", "known_hosts",
        "already_trusted"}``.

    Raises:
        HardwareRequestError: 400 for a bad destination or fingerprint, 409 when the
            host presents another key (nothing is written), 502 when it cannot be reached.
    """
    if (
        not isinstance(destination, str)
        or not _DESTINATION.match(destination)
        or destination.startswith("-")
    ):
        raise HardwareRequestError(
            400, f"{destination!r} is not a host name or ssh_config alias", "host"
        )
    if not isinstance(fingerprint, str) or not _FINGERPRINT.match(fingerprint.strip()):
        raise HardwareRequestError(
            400,
            "'fingerprint' must be the SHA256 fingerprint you were shown "
            "(SHA256:... as `ssh-keygen -l` prints it)",
            "fingerprint",
        )
    try:
        presented = await trust_seen_key(destination, settings, fingerprint)
    except KeyMismatchError as exc:
        raise HardwareRequestError(409, str(exc), "fingerprint") from None
    except HostUnreachableError as exc:
        raise HardwareRequestError(502, str(exc), "host") from None
    except TransportError as exc:
        raise HardwareRequestError(502, str(exc), "host") from None
    already = presented.status != UNKNOWN
    if log is not None and not already:
        log.info(
            "trusted %s key %s of %s (%s) in %s",
            presented.algorithm,
            presented.fingerprint,
            destination,
            presented.address,
            presented.known_hosts,
        )
    return {
        "destination": destination,
        "host": presented.host,
        "port": presented.port,
        "fingerprint": presented.fingerprint,
        "algorithm": presented.algorithm,
        "known_hosts": str(Path(presented.known_hosts).expanduser()),
        "already_trusted": already,
    }


__all__ = ["trust_host_key"]
