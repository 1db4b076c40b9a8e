"""Folding unusable hardware: one line per provider and reason, expandable to its rows.

The ipywidgets picker and the command line show the listing this way; the JupyterLab
picker does the same in ``labextension/src/folding.ts``. Usable rows come first, in
listing order. Two or more unusable rows of one provider with the same reason become
one :class:`Fold` (``AWS: no credentials — set AWS_PROFILE or run `aws configure```),
followed by its rows only when expanded; a lone unusable row is shown as itself.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from .hardware import HardwareOption


@dataclass(frozen=True)
class Fold:
    """Unusable rows of one provider that share a reason.

    Attributes:
        provider: ``aws``...
        title: ``AWS``...
        reason: ``no credentials``...
        hint: What to do, commands in backticks.
        options: The rows folded.
    """

    provider: str
    title: str
    reason: str
    hint: str
    options: tuple[HardwareOption, ...]

    @property
    def key(self) -> str:
        """What identifies the fold across listings (``aws:no credentials``)."""
        return f"{self.provider}:{self.reason}"

    @property
    def text(self) -> str:
        """``AWS: no credentials — set AWS_PROFILE or run `aws configure```."""
        return (
            f"{self.title}: {self.reason} — {self.hint}"
            if self.hint
            else (f"{self.title}: {self.reason}")
        )

    @property
    def count_text(self) -> str:
        """``46 types``: how many rows it holds."""
        return f"{len(self.options)} {'type' if len(self.options) == 1 else 'types'}"


def fold_hardware(
    options: Sequence[HardwareOption], expanded: Collection[str] = ()
) -> list[HardwareOption | Fold]:
    """The listing as the pickers show it: usable rows, then folds and lone unusable rows.

    Args:
        options: The rows, in listing order (already filtered by a search).
        expanded: Keys of folds whose rows follow them.
    """
    shown: list[HardwareOption | Fold] = [o for o in options if o.usable]
    groups: dict[tuple[str, str], list[HardwareOption]] = {}
    for option in options:
        if not option.usable:
            groups.setdefault((option.provider, option.reason or option.why_not or ""), []).append(
                option
            )
    for (provider, reason), rows in groups.items():
        if len(rows) == 1:
            shown.extend(rows)
            continue
        fold = Fold(
            provider=provider,
            title=rows[0].provider_title or provider.upper(),
            reason=reason or "not available",
            hint=rows[0].hint or "",
            options=tuple(rows),
        )
        shown.append(fold)
        if fold.key in expanded:
            shown.extend(rows)
    return shown


__all__ = ["Fold", "fold_hardware"]
