"""Displays from a kernel someone else can run code in keep what cannot run code."""

from __future__ import annotations

from jupyter_remote_hw.notebook.untrusted_output import untrusted_display


def test_only_kinds_that_cannot_run_code_are_kept_and_html_svg_markdown_are_sanitized() -> None:
    data = {
        "text/plain": "plain",
        "image/png": "iVBOR",
        "text/latex": "$x$",
        "text/html": '<table class="dataframe"><tr><td style="color: red">1</td></tr></table>'
        '<form action="/x"><input></form><object data="x"></object><embed src="y">',
        "image/svg+xml": '<svg viewBox="0 0 4 4" onload="alert(1)"><script>alert(2)</script>'
        '<circle cx="2" cy="2" r="1" fill="red"/><foreignObject><iframe/>'
        "</foreignObject></svg>",
        "text/markdown": "**bold** <img src=x onerror=alert(1)>",
        "application/javascript": "alert(3)",
        "text/javascript": "alert(4)",
        "application/vnd.jupyter.widget-view+json": {"model_id": "m"},
    }
    shown, metadata = untrusted_display(data, {"image/png": {"width": 4}, "text/javascript": {}})
    assert set(shown) == {
        "text/plain",
        "image/png",
        "text/latex",
        "text/html",
        "image/svg+xml",
        "text/markdown",
    }
    assert metadata == {"image/png": {"width": 4}}
    assert shown["text/html"] == (
        '<table class="dataframe"><tbody><tr><td style="color:red">1</td></tr></tbody></table>'
    )
    assert shown["image/svg+xml"] == (
        '<svg viewBox="0 0 4 4"><circle cx="2" cy="2" r="1" fill="red"></circle></svg>'
    )
    assert shown["text/markdown"] == '**bold** <img src="x">'
    # A Markdown link to javascript: is dropped; a display with nothing left says so.
    link = {"text/markdown": "[x](javascript:alert(1))"}
    assert untrusted_display(link, {})[0] == {
        "text/plain": "[output not shown: text/markdown, from a kernel that someone else can "
        "run code in]"
    }
    assert untrusted_display({"text/markdown": "> quoted & kept"}, {})[0] == {
        "text/markdown": "> quoted & kept"
    }
