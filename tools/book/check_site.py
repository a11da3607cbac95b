#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Offline link check of a built HTML site: every internal link and resource must exist.

    python3 tools/book/check_site.py build/book/html [build/docs/html ...]

Sphinx's ``-b linkcheck`` needs the network; this walks the HTML files instead and, for
every ``href``/``src``/``srcset`` (and ``url(...)`` in CSS) that points inside the site,
checks that the file exists and, for ``page.html#anchor``, that the page has an element
with that ``id`` (or an ``<a name>``). External URLs (``https:``, ``mailto:``, ...) are
counted, not fetched. Exit status 1 and one line per broken link when anything is missing.
"""

from __future__ import annotations

import argparse
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

URL_ATTRS = {"href", "src", "poster", "data"}
CSS_URL_RE = re.compile(r"url\(\s*(['\"]?)([^'\")]+)\1\s*\)")


class PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[int, str, str]] = []  # (line, tag, url)

    def handle_starttag(self, tag, attrs):
        line = self.getpos()[0]
        for key, value in attrs:
            if value is None:
                continue
            if key == "id" or (key == "name" and tag == "a"):
                self.ids.add(value)
            elif key in URL_ATTRS:
                if tag == "link" and dict(attrs).get("rel") in ("preconnect", "dns-prefetch"):
                    continue
                self.links.append((line, tag, value))
            elif key == "srcset":
                for part in value.split(","):
                    url = part.strip().split(" ")[0]
                    if url:
                        self.links.append((line, tag, url))

    handle_startendtag = handle_starttag


def is_external(url: str) -> bool:
    parts = urlsplit(url)
    return bool(parts.scheme) or url.startswith("//")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sites", type=Path, nargs="+", help="folders of built HTML")
    args = ap.parse_args(argv)
    errors: list[str] = []
    stats = {"pages": 0, "internal": 0, "anchors": 0, "external": 0, "css": 0}
    for site in args.sites:
        site = site.resolve()
        if not (site / "index.html").is_file():
            errors.append(f"{site}: no index.html (was the site built?)")
            continue
        pages: dict[Path, PageParser] = {}
        for page in sorted(site.rglob("*.html")):
            parser = PageParser()
            parser.feed(page.read_text(encoding="utf-8", errors="replace"))
            pages[page] = parser

        def ids_of(path: Path) -> set[str] | None:
            if path not in pages:
                return None
            return pages[path].ids

        def check(origin: str, base: Path, url: str, anchor_ok: bool = True) -> None:
            url = url.strip()
            if not url or url.startswith(("data:", "javascript:", "mailto:", "tel:")):
                return
            if is_external(url):
                stats["external"] += 1
                return
            parts = urlsplit(url)
            path = unquote(parts.path)
            if path.startswith("/"):
                errors.append(f"{origin}: absolute link {url!r} breaks when the site is not "
                              "served from the root")
                return
            target = (base.parent / path).resolve() if path else base
            stats["internal"] += 1
            try:
                target.relative_to(site)
            except ValueError:
                errors.append(f"{origin}: {url!r} points outside the site ({target})")
                return
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                errors.append(f"{origin}: {url!r}: no such file {target.relative_to(site)}")
                return
            fragment = unquote(parts.fragment)
            if fragment and anchor_ok and target.suffix == ".html":
                stats["anchors"] += 1
                ids = ids_of(target)
                if ids is not None and fragment not in ids:
                    errors.append(f"{origin}: {url!r}: no id {fragment!r} in "
                                  f"{target.relative_to(site)}")

        for page, parser in pages.items():
            stats["pages"] += 1
            rel = page.relative_to(site)
            for line, tag, url in parser.links:
                check(f"{site.name}/{rel}:{line} <{tag}>", page, url)
        for css in sorted(site.rglob("*.css")):
            text = css.read_text(encoding="utf-8", errors="replace")
            for m in CSS_URL_RE.finditer(text):
                stats["css"] += 1
                line = text.count("\n", 0, m.start()) + 1
                check(f"{site.name}/{css.relative_to(site)}:{line} url()", css, m[2],
                      anchor_ok=False)
    for err in errors:
        print(f"error: {err}", file=sys.stderr)
    print(f"check_site: {stats['pages']} pages, {stats['internal']} internal links "
          f"({stats['anchors']} with anchors), {stats['css']} CSS urls, "
          f"{stats['external']} external links not fetched, {len(errors)} broken: "
          f"{'FAILED' if errors else 'ok'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
