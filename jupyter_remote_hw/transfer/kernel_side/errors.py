"""Errors of variable transfers; each names the variable at fault."""

from __future__ import annotations


class TransferError(Exception):
    """A transfer failed and nothing was assigned on the receiving side.

    Attributes:
        name: The variable at fault, or None when the transfer as a whole failed.
    """

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


class RefusedVariableError(TransferError):
    """The restricted loader refused to rebuild a variable: its pickle calls something
    not allowed from a kernel that someone else can run code in (see
    :mod:`.restricted`). Nothing was assigned."""


class NotSerializableError(TransferError):
    """A variable cannot be serialized (an open file, a generator, a lock ...).

    Attributes:
        type_name: The variable's type, as ``module.Qualname``.
        reason: Why, in words (``it is a lock (TypeError: ...)``).
    """

    def __init__(self, name: str, type_name: str, reason: str) -> None:
        super().__init__(
            f"cannot send {name!r} ({type_name}): {reason}. Nothing was sent; leave it out "
            "of the transfer, or turn it into something that can be pickled.",
            name,
        )
        self.type_name = type_name
        self.reason = reason


class MissingVariableError(TransferError):
    """A named variable does not exist on the sending side."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no variable named {name!r} to send. Nothing was sent.", name)


class NoTransferHandlerError(TransferError):
    """The kernel ignored a transfer request: nothing in it answers them (a plain
    kernel, without ``%load_ext jupyter_remote_hw``)."""
