"""Rich output from a kernel that someone else can run code in, made safe to show.

``%%remote`` shows the remote cell's displays in the local notebook, where
JupyterLab trusts what the local kernel publishes: HTML runs its scripts and
JavaScript outputs run. From a shared kernel (or one joined from someone
else's share) a display may come from code a teammate planted, so it is shown
as JupyterLab shows untrusted output: only the kinds of data that cannot run
code are kept (text, images, LaTeX, JSON), and HTML, Markdown and SVG pass
through an allowlist sanitizer (`nh3`, the Ammonia sanitizer) that removes
scripts, event handlers, ``javascript:`` URLs, iframes, objects, embeds and
forms. JavaScript, widget views and every other kind are dropped.
"""

from __future__ import annotations

import re
from typing import Any, Final

import nh3

#: Kinds of data shown as they are: none of them runs code.
PLAIN: Final = frozenset(
    {
        "text/plain",
        "text/latex",
        "application/json",
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "image/bmp",
    }
)

#: Kinds that can hold HTML: shown sanitized.
SANITIZED: Final = frozenset({"text/html", "text/markdown", "image/svg+xml"})

#: URL schemes that run code or hide content in a Markdown link (``[x](javascript:...)``).
_CODE_SCHEMES: Final = re.compile(r"(java|vb)script:|data:", re.IGNORECASE)

_HTML_ATTRIBUTES: Final = {
    **{tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()},
    "*": {
        "class",
        "title",
        "style",
        "align",
        "valign",
        "border",
        "colspan",
        "rowspan",
        "dir",
        "lang",
    },
}

_SVG_TAGS: Final = frozenset(
    {
        "svg",
        "g",
        "path",
        "rect",
        "circle",
        "ellipse",
        "line",
        "polyline",
        "polygon",
        "text",
        "tspan",
        "defs",
        "clipPath",
        "linearGradient",
        "radialGradient",
        "stop",
        "title",
        "desc",
        "marker",
        "pattern",
        "mask",
        "symbol",
    }
)

_SVG_ATTRIBUTES: Final = {
    "*": {
        "id",
        "class",
        "style",
        "transform",
        "fill",
        "fill-opacity",
        "fill-rule",
        "stroke",
        "stroke-width",
        "stroke-opacity",
        "stroke-dasharray",
        "stroke-linecap",
        "stroke-linejoin",
        "opacity",
        "font-size",
        "font-family",
        "font-weight",
        "text-anchor",
        "clip-path",
        "mask",
        "d",
        "x",
        "y",
        "x1",
        "x2",
        "y1",
        "y2",
        "cx",
        "cy",
        "r",
        "rx",
        "ry",
        "dx",
        "dy",
        "width",
        "height",
        "points",
        "viewBox",
        "xmlns",
        "version",
        "offset",
        "stop-color",
        "stop-opacity",
        "preserveAspectRatio",
        "gradientUnits",
        "gradientTransform",
        "patternUnits",
        "clipPathUnits",
        "markerWidth",
        "markerHeight",
        "refX",
        "refY",
        "orient",
    }
}

_STYLE_PROPERTIES: Final = frozenset(
    {
        "background",
        "background-color",
        "border",
        "border-bottom",
        "border-collapse",
        "border-color",
        "border-left",
        "border-right",
        "border-spacing",
        "border-style",
        "border-top",
        "border-width",
        "color",
        "display",
        "fill",
        "fill-opacity",
        "font",
        "font-family",
        "font-size",
        "font-style",
        "font-weight",
        "height",
        "line-height",
        "margin",
        "margin-bottom",
        "margin-left",
        "margin-right",
        "margin-top",
        "max-height",
        "max-width",
        "min-width",
        "opacity",
        "overflow",
        "padding",
        "padding-bottom",
        "padding-left",
        "padding-right",
        "padding-top",
        "stroke",
        "stroke-width",
        "text-align",
        "text-decoration",
        "vertical-align",
        "white-space",
        "width",
    }
)


def sanitize_html(html: str) -> str:
    """HTML without anything that runs code (scripts, handlers, ``javascript:`` URLs,
    iframes, objects, embeds, forms) or styles the page outside it."""
    return str(
        nh3.clean(html, attributes=_HTML_ATTRIBUTES, filter_style_properties=set(_STYLE_PROPERTIES))
    )


def sanitize_svg(svg: str) -> str:
    """SVG drawing elements only: no scripts, handlers, links or foreign objects."""
    return str(
        nh3.clean(
            svg,
            tags=set(_SVG_TAGS),
            attributes=_SVG_ATTRIBUTES,
            filter_style_properties=set(_STYLE_PROPERTIES),
        )
    )


def sanitize_markdown(markdown: str) -> str | None:
    """Markdown with its HTML sanitized; None if it links to a scheme that runs code.

    Markdown without HTML is kept as written (sanitizing would escape its ``>``).
    """
    if _CODE_SCHEMES.search(re.sub(r"\s+", "", markdown)):
        return None
    return sanitize_html(markdown) if "<" in markdown else markdown


def untrusted_display(
    data: dict[str, Any], metadata: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A display's data and metadata as they may be shown from an untrusted kernel.

    Returns:
        The kinds of :data:`PLAIN` as they are, those of :data:`SANITIZED`
        sanitized, nothing else; metadata only for the kinds kept.
    """
    shown: dict[str, Any] = {}
    for kind, value in data.items():
        if kind in PLAIN:
            shown[kind] = value
        elif kind == "text/markdown" and isinstance(value, str):
            markdown = sanitize_markdown(value)
            if markdown is not None:
                shown[kind] = markdown
        elif kind in SANITIZED and isinstance(value, str):
            shown[kind] = sanitize_svg(value) if kind == "image/svg+xml" else sanitize_html(value)
    if not shown:
        dropped = ", ".join(sorted(data)) or "nothing"
        shown["text/plain"] = (
            f"[output not shown: {dropped}, from a kernel that someone else can run code in]"
        )
    kept = {kind: value for kind, value in metadata.items() if kind in shown}
    return shown, kept
