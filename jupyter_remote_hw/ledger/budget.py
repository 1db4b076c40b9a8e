"""The budget guard: a launch that would cost more per hour than configured is refused."""

from __future__ import annotations

import math

from traitlets import Bunch, Float, TraitError, validate
from traitlets.config import LoggingConfigurable

from ..errors import UserError
from . import Ledger


class BudgetExceededError(UserError, RuntimeError):
    """A launch would exceed a configured limit; the message gives the figures.

    Attributes:
        price: The $/h of the machine asked for.
        limit: The limit it would exceed.
        running: The $/h of the machines already running (for the total limit).
    """

    def __init__(self, message: str, price: float, limit: float, running: float) -> None:
        super().__init__(message)
        self.price = price
        self.limit = limit
        self.running = running


class BudgetGuard(LoggingConfigurable):
    """Limits on what machines may cost per hour, checked before every launch or start.

    Configure as ``c.BudgetGuard.max_per_machine`` and ``c.BudgetGuard.max_total``.
    """

    max_per_machine = Float(
        0.0,
        min=0.0,
        config=True,
        help="Most US dollars per hour one machine may cost (0: no limit). A launch of "
        "a dearer instance type is refused.",
    )
    max_total = Float(
        0.0,
        min=0.0,
        config=True,
        help="Most US dollars per hour all running machines together may cost (0: no "
        "limit). A launch that would go above it is refused.",
    )

    @validate("max_per_machine", "max_total")
    def _finite(self, proposal: Bunch) -> float:
        """NaN or infinity would silently mean no limit: refused."""
        value = float(proposal["value"])
        if not math.isfinite(value):
            raise TraitError(
                f"BudgetGuard.{proposal['trait'].name} must be a number of US "
                f"dollars per hour, 0 or more (0: no limit), not {value}"
            )
        return value

    def check(
        self,
        what: str,
        price: float | None,
        ledger: Ledger,
        exclude: str | None = None,
        running: float | None = None,
    ) -> None:
        """Refuse ``what`` at ``price`` $/h when it breaks a limit.

        Args:
            what: The machine, for the message (``g5.xlarge in us-east-1``).
            price: Its $/h, or None when the catalog does not know it.
            ledger: Where the running machines are.
            exclude: A machine not to count among the running ones (the one
                being started again).
            running: The $/h of the running machines, when the caller read it
                (inside the ledger transaction that records the new machine).

        Raises:
            BudgetExceededError: With the figures and the setting to change.
        """
        limited = self.max_per_machine > 0 or self.max_total > 0
        if price is None:
            if limited:
                raise BudgetExceededError(
                    f"{what} has no known price, so the budget cannot be checked: run "
                    "`jupyter remote-hw catalog refresh`, or pick a type with a price",
                    0.0,
                    self.max_per_machine or self.max_total,
                    0.0,
                )
            return
        if self.max_per_machine > 0 and price > self.max_per_machine:
            raise BudgetExceededError(
                f"budget: {what} costs ${price:.4g}/h, above the limit of "
                f"${self.max_per_machine:.4g}/h per machine (c.BudgetGuard.max_per_machine); "
                "pick a cheaper type or raise the limit",
                price,
                self.max_per_machine,
                0.0,
            )
        if running is None:
            running = ledger.active_rate(exclude=exclude)
        if self.max_total > 0 and running + price > self.max_total:
            raise BudgetExceededError(
                f"budget: {what} at ${price:.4g}/h plus the ${running:.4g}/h of the machines "
                f"already running makes ${running + price:.4g}/h, above the total limit of "
                f"${self.max_total:.4g}/h (c.BudgetGuard.max_total); stop a machine "
                "(`jupyter remote-hw list`) or raise the limit",
                price,
                self.max_total,
                running,
            )
