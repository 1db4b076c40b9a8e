"""Events for the push channel: launch progress, machine state, hardware switches.

The server extension makes one :class:`EventHub`; the launch steps of every
kernel report to it (it is a launch listener), and the machine and switch
actions publish to it. The event socket of the REST API forwards every event
to each connected browser.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

Subscriber = Callable[[dict[str, Any]], None]
"""Receives every event published after it subscribed."""


class EventHub:
    """Fans events out to subscribers; one failing subscriber does not stop the others.

    Every event is a dict with ``type`` (``launch``, ``machine``, ``switch``)
    and ``time`` (epoch seconds), plus the fields of its type.

    Args:
        log: Where a failing subscriber is logged.
    """

    def __init__(self, log: logging.Logger) -> None:
        self.log = log
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Send every later event to ``subscriber``; returns what unsubscribes it."""
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

        return unsubscribe

    @property
    def subscribers(self) -> int:
        """How many subscribers there are now."""
        return len(self._subscribers)

    def publish(self, event_type: str, **fields: Any) -> dict[str, Any]:
        """Send an event to every subscriber; returns the event sent."""
        event = {"type": event_type, "time": time.time(), **fields}
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception:
                self.log.exception("jupyter_remote_hw: an event subscriber failed")
        return event

    def launch_listener(self, event: dict[str, Any]) -> None:
        """A launch listener (see :mod:`.providers.launch_steps`): publishes ``launch`` events."""
        self.publish("launch", **event)


__all__ = ["EventHub", "Subscriber"]
