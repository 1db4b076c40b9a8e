"""The steps of a kernel launch, now in :mod:`.providers.launch_steps` (this name still
works for code that imports it from here)."""

from .providers.launch_steps import LaunchError, LaunchListener, LaunchSteps, StepRecord

__all__ = ["LaunchError", "LaunchListener", "LaunchSteps", "StepRecord"]
