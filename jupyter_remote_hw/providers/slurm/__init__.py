"""The ``slurm`` provider: kernels inside SLURM allocations, reached through login nodes."""

from .errors import LoginUnreachableError, SLURMError
from .machine import SLURMMachine
from .provider import SLURMProvider

__all__ = ["LoginUnreachableError", "SLURMError", "SLURMMachine", "SLURMProvider"]
