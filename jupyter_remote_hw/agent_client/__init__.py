"""The local side of the host agent: build and ship it, start it, talk to it, and hold
our side of each kernel's relay (``relay``)."""

from .bootstrap import Progress, start_local_agent, start_ssh_agent
from .bundle import agent_zipapp
from .client import AgentClient
from .errors import AgentError, AgentUnavailableError

__all__ = [
    "AgentClient",
    "AgentError",
    "AgentUnavailableError",
    "Progress",
    "agent_zipapp",
    "start_local_agent",
    "start_ssh_agent",
]
