"""Sharing a running kernel with teammates, enforced by the host's sshd.

A share grants one teammate's SSH public key access to one kernel: one line
in the host's ``authorized_keys`` that allows port forwards to exactly the
kernel channels of the role (a viewer: the output stream; a collaborator:
every channel) until it expires. The owner makes, lists and revokes shares
(:mod:`.owner`); the teammate joins with the share file (:mod:`.join`).
No tornado here: the command line and the server call into these modules.
"""

from .roles import COLLABORATOR, ROLE_CHANNELS, VIEWER, ShareError, parse_duration
from .sharefile import ShareFile

__all__ = ["COLLABORATOR", "ROLE_CHANNELS", "VIEWER", "ShareError", "ShareFile", "parse_duration"]
