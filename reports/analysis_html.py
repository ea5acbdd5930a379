"""analysis.html: the report rendered for a browser, beside analysis.md (the dashboard links to it).
The plot is the report folder's perf_improvement.png, not the base64 text analysis.md embeds."""

from __future__ import annotations

import html

from markdown_it import MarkdownIt

from tracelake.reports.report_inputs import PLOT_PENDING

PLOT_FILE = "perf_improvement.png"
_STYLE = """
body { font: 15px/1.5 -apple-system, "Segoe UI", Roboto, sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; color: #1f2328; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; display: block; overflow-x: auto; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
code { background: #f6f8fa; padding: 1px 4px; border-radius: 4px; font-size: 90%; }
pre { background: #f6f8fa; padding: 12px; overflow-x: auto; }
pre code { background: none; padding: 0; }
blockquote { border-left: 4px solid #d0d7de; margin: 1em 0; padding: 0 1em; color: #59636e; }
img { max-width: 100%; }
h1, h2, h3 { border-bottom: 1px solid #d8dee4; padding-bottom: .3em; }
"""


def render_analysis_html(markdown: str, title: str) -> str:
    """`markdown` as rendered before its plot was embedded (it holds PLOT_PENDING), as one HTML page.
    Raw HTML in it is the report's own anchors: trace strings were escaped where they landed."""
    text = markdown.replace(f"data:image/png;base64,{PLOT_PENDING}", PLOT_FILE)
    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>\n<body>\n{body}</body></html>\n")
