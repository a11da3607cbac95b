#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Open every chapter of the built book in headless Chromium and check that it renders.

    python3 tools/book/browser_check.py --html build/book/html --src build/book/src \\
        --screenshots build/book/screenshots [--chromium /usr/bin/chromium]

The site is served from a throwaway HTTP server on 127.0.0.1 (a random free port, stopped
at the end), as a reader would see it. For every chapter (each ``.md`` of the staged
Sphinx source) the page is loaded with ``chromium --headless=new --dump-dom``. A small
script, added to the page by the server only for this check, waits for the ``load``
event and writes what it finds into the DOM that Chromium dumps. The check fails unless:

- the page's ``<h1>`` is the chapter's ``# title``;
- every ``<img>`` finished loading with ``naturalWidth > 0``, and its file is a valid PNG
  or SVG;
- every MathML formula has a non-empty box (the browser rendered it), and no formula
  fell back to an error;
- no code block (``<pre>`` in the article, with every collapsible ``<details>`` block
  opened) is wider than its box: no line is cut off or hidden behind a sideways scroll.

It also saves screenshots of the front page, of every step chapter, of the roofline
section of the measuring chapter and of the search-space section of every tuned step
(``--window-size=1280,2000``) to --screenshots. Debian: ``apt-get install chromium``; as
root Chromium needs ``--no-sandbox``, which this script passes.
"""

from __future__ import annotations

import argparse
import functools
import html
import json
import re
import shutil
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

PROBE_ID = "flashsteps-browser-check"
PROBE = f"""
<script>
window.addEventListener("load", () => {{
  const out = {{}};
  const h1 = document.querySelector("article h1, h1");
  if (h1) {{
    const copy = h1.cloneNode(true);
    copy.querySelectorAll("a.headerlink").forEach(a => a.remove());
    out.h1 = copy.textContent.trim();
  }}
  out.images = Array.from(document.images).map(img => ({{
    src: img.getAttribute("src"), complete: img.complete, width: img.naturalWidth,
    height: img.naturalHeight }}));
  out.math = Array.from(document.getElementsByTagName("math")).map(m => {{
    const r = m.getBoundingClientRect();
    return {{ width: r.width, height: r.height }};
  }});
  out.math_errors = document.querySelectorAll(".math-error").length;
  // Code blocks: open every collapsible block, then any line wider than its box is cut off
  // (the CSS wraps long lines; a block that still overflows sideways fails the check).
  document.querySelectorAll("details").forEach(d => {{ d.open = true; }});
  out.details = document.querySelectorAll("details").length;
  out.cut = Array.from(document.querySelectorAll("article pre")).filter(
    p => p.id !== "{PROBE_ID}" && p.scrollWidth > p.clientWidth + 1).map(p => {{
      const fig = p.closest("div.literal-block-wrapper, div.highlight");
      const cap = fig && fig.parentElement.querySelector(".caption-text");
      return (cap ? cap.textContent : p.textContent.slice(0, 60)) +
             ` (${{p.scrollWidth}} > ${{p.clientWidth}} px)`;
    }});
  out.pre = document.querySelectorAll("article pre").length;
  const pre = document.createElement("pre");
  pre.id = "{PROBE_ID}";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}});
</script>
"""
SCROLL = """
<script>
window.addEventListener("load", () => {{
  // Hide what comes before the section, so that the screenshot starts with it.
  let node = document.getElementById("{anchor}");
  while (node && node.tagName !== "ARTICLE") {{
    for (let prev = node.previousElementSibling; prev; prev = prev.previousElementSibling)
      prev.style.display = "none";
    node = node.parentElement;
  }}
}});
</script>
"""
CHROMIUM_FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--hide-scrollbars", "--no-first-run", "--no-default-browser-check",
                  "--disable-extensions", "--mute-audio"]


class Handler(SimpleHTTPRequestHandler):
    """Serves the site; adds the probe script to HTML pages requested with ?probe."""

    def do_GET(self):  # noqa: N802 (http.server's naming)
        parts = urlsplit(self.path)
        scroll = re.fullmatch(r"scroll=([\w-]+)", parts.query)
        if not (parts.query == "probe" or scroll) or not parts.path.endswith(".html"):
            return super().do_GET()
        path = Path(self.translate_path(parts.path))
        if not path.is_file():
            return self.send_error(404)
        text = path.read_text(encoding="utf-8")
        # ?probe adds the check; ?scroll=ID makes the page start at that section, for a
        # screenshot (headless Chromium does not scroll to a URL's #fragment for one).
        script = PROBE if parts.query == "probe" else SCROLL.format(anchor=scroll[1])
        text = text.replace("</body>", script + "</body>", 1)
        data = text.encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):  # quiet
        pass


def chapter_titles(src: Path) -> dict[str, str]:
    """{page.html path relative to the site: the chapter's '# title'} for every chapter."""
    titles = {}
    for md in sorted(src.rglob("*.md")):
        rel = md.relative_to(src)
        if rel.parts[0].startswith("_") or md.is_symlink() or \
                any((src / p).is_symlink() for p in rel.parents):  # a repository file
            continue
        for line in md.read_text(encoding="utf-8").splitlines():
            if line.startswith("# "):
                title = re.sub(r"[`*]", "", line[2:]).strip()
                titles[rel.with_suffix(".html").as_posix()] = title
                break
    return titles


def valid_image(path: Path) -> str | None:
    """None when path is a valid PNG or SVG, else what is wrong."""
    if not path.is_file():
        return "missing"
    data = path.read_bytes()
    if path.suffix.lower() == ".png":
        return None if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 33 else "not a PNG"
    if path.suffix.lower() == ".svg":
        try:
            root = ET.fromstring(data)
        except ET.ParseError as exc:
            return f"not valid XML ({exc})"
        return None if root.tag.endswith("svg") else f"root element is {root.tag}, not svg"
    return None


def run_chromium(chromium: str, args: list[str], timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([chromium, *CHROMIUM_FLAGS, *args], capture_output=True, text=True,
                          timeout=timeout)


def section_including(chapter: Path, name: str) -> str | None:
    """The anchor of the section of a staged chapter that includes a generated file called
    ``name`` (MyST's heading slug), or None."""
    if not chapter.is_file():
        return None
    heading = None
    for line in chapter.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif line.startswith("```{include}") and line.rstrip().endswith("/" + name) and heading:
            return re.sub(r"[^\w\- ]", "", heading.lower()).strip().replace(" ", "-")
    return None


def figure_sections(chapter: Path, src: Path, page: Path) -> list[tuple[str, str]]:
    """(element id, figure file) for every figure that a step's book_figures.py drew and a
    staged chapter includes (e.g. step 04's fragments_nvidia.svg); the id is that of the
    built page's <figure> holding the image."""
    if not chapter.is_file() or not page.is_file():
        return []
    built = page.read_text(encoding="utf-8")
    found = []
    for line in chapter.read_text(encoding="utf-8").splitlines():
        m = re.match(r"```\{include\} /(_generated/steps/[^/]+/[^/]+\.md)\s*$", line)
        included = src / m[1] if m else None
        if included is None or not included.is_file():
            continue
        text = included.read_text(encoding="utf-8")
        if "book_figures.py" not in text:
            continue
        for svg in re.findall(r"```\{figure\} \S+/([^/\s]+\.svg)", text):
            at = built.find(svg)
            # the <figure> element holding the image (the screenshot starts with it)
            ids = re.findall(r'<figure[^>]*\sid="([\w-]+)"', built[:at]) if at >= 0 else []
            if ids:
                found.append((ids[-1], svg))
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--html", type=Path, required=True, help="the built site")
    ap.add_argument("--src", type=Path, required=True, help="the staged Sphinx source")
    ap.add_argument("--screenshots", type=Path, required=True, help="where to save PNGs")
    ap.add_argument("--chromium", default=None, help="browser binary (default: chromium)")
    args = ap.parse_args(argv)
    chromium = args.chromium if args.chromium and "NOTFOUND" not in args.chromium else None
    chromium = chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("browser_check: chromium not found (Debian: apt-get install chromium)",
              file=sys.stderr)
        return 1
    site = args.html.resolve()
    titles = chapter_titles(args.src.resolve())
    if not titles:
        print(f"browser_check: no chapters under {args.src}", file=sys.stderr)
        return 1

    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(Handler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    errors: list[str] = []
    try:
        for page, title in titles.items():
            if not (site / page).is_file():
                errors.append(f"{page}: not built")
                continue
            proc = run_chromium(chromium, ["--virtual-time-budget=15000", "--dump-dom",
                                           f"{base}/{page}?probe"])
            m = re.search(rf'<pre id="{PROBE_ID}">(.*?)</pre>', proc.stdout, re.S)
            if proc.returncode != 0 or not m:
                errors.append(f"{page}: Chromium did not render it (exit {proc.returncode}): "
                              f"{proc.stderr.strip()[-500:]}")
                continue
            found = json.loads(html.unescape(m[1]))
            problems = []
            if found.get("h1") != title:
                problems.append(f"h1 is {found.get('h1')!r}, the chapter's title is {title!r}")
            for img in found["images"]:
                if not img["complete"] or img["width"] <= 0:
                    problems.append(f"image {img['src']} did not load")
                src = unquote(urlsplit(img["src"] or "").path)
                bad = valid_image((site / page).parent / src) if src else "no src"
                if bad:
                    problems.append(f"image {img['src']}: {bad}")
            empty = [i for i, box in enumerate(found["math"]) if box["width"] <= 0 or box["height"] <= 0]
            if empty:
                problems.append(f"{len(empty)} of {len(found['math'])} formulas rendered empty")
            if found["math_errors"]:
                problems.append(f"{found['math_errors']} formulas failed to convert")
            for cut in found.get("cut", []):
                problems.append(f"a code block's lines are cut off: {cut}")
            status = "ok" if not problems else "FAILED"
            print(f"  {page}: h1 {found.get('h1')!r}, {len(found['images'])} images, "
                  f"{len(found['math'])} formulas, {found.get('pre', 0)} code blocks "
                  f"({found.get('details', 0)} collapsible blocks opened): {status}")
            errors += [f"{page}: {p}" for p in problems]

        args.screenshots.mkdir(parents=True, exist_ok=True)
        steps = sorted(p for p in titles if p.startswith("steps/"))
        shots = [("index.html", "front_page.png")]
        shots += [(page, f"{Path(page).stem}.png") for page in steps]
        for page in steps:  # the generated diff, explained first and folded
            anchor = section_including(args.src / f"{page[:-len('.html')]}.md", "changes.md")
            if anchor and page != steps[0]:
                shots.append((f"{page}?scroll={anchor}", f"{Path(page).stem}_diff.png"))
        for page in ("glossary.html", "limits.html", "references.html"):
            if page in titles:
                shots.append((page, f"{Path(page).stem}.png"))
        if "measuring.html" in titles:  # the roofline figure, scrolled to
            shots.append(("measuring.html?scroll=the-roofline", "measuring_roofline.png"))
        for page in steps:  # a tuned step's search-space figure, scrolled to
            anchor = section_including(args.src / f"{page[:-len('.html')]}.md",
                                       "search_space.md")
            if anchor:
                shots.append((f"{page}?scroll={anchor}", f"{Path(page).stem}_search_space.png"))
        for page in steps:  # every figure a step's book_figures.py drew, scrolled to
            src_md = args.src / f"{page[:-len('.html')]}.md"
            for anchor, name in figure_sections(src_md, args.src, site / page):
                shots.append((f"{page}?scroll={anchor}", f"{Path(page).stem}_{Path(name).stem}.png"))
        for page, name in shots:
            out = args.screenshots.resolve() / name
            out.unlink(missing_ok=True)
            proc = run_chromium(chromium, ["--virtual-time-budget=15000", "--window-size=1280,2000",
                                           f"--screenshot={out}", f"{base}/{page}"])
            if proc.returncode != 0 or valid_image(out):
                errors.append(f"screenshot of {page} failed: {proc.stderr.strip()[-500:]}")
            else:
                print(f"  screenshot: {out}")
    finally:
        server.shutdown()
        server.server_close()
    for err in errors:
        print(f"error: {err}", file=sys.stderr)
    print(f"browser_check: {len(titles)} chapters, {len(errors)} problems: "
          f"{'FAILED' if errors else 'ok'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
