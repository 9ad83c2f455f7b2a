"""Reading `gpustack diff --output markdown` as GitHub shows it: markdown-it (CommonMark with
GitHub's tables) makes the HTML, html.parser reads its elements."""

from __future__ import annotations

from html.parser import HTMLParser

from markdown_it import MarkdownIt


def to_html(markdown: str) -> str:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown)


class Page(HTMLParser):
    """The elements of an HTML page: each tag opened and closed, the text of every `<code>`
    (inline, or a code block's), and each table row's cells."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.opened: list[str] = []
        self.closed: list[str] = []
        self.codes: list[str] = []
        self.rows: list[list[str]] = []
        self.text: list[str] = []
        self._code: list[str] | None = None
        self._cell: list[str] | None = None
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.opened.append(tag)
        if tag == "code":
            self._code = []
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        self.closed.append(tag)
        if tag == "code" and self._code is not None:
            self.codes.append("".join(self._code))
            self._code = None
        elif tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._code is not None:
            self._code.append(data)
        if self._cell is not None:
            self._cell.append(data)


# The only elements gpustack's comment makes.
ELEMENTS = {
    *("h3", "p", "blockquote", "strong", "br", "code", "pre", "details", "summary", "ul", "li"),
    *("table", "thead", "tbody", "tr", "th", "td"),
}
