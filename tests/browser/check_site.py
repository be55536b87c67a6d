#!/usr/bin/env python3
"""The browser check of the built site: what a reader's browser would show.

Loads index.html and every chapter page (each ``*.html`` at the site's top level except
Sphinx's generated genindex/search/modindex pages) in Debian's Chromium, headless, driven
by Debian's chromedriver through Selenium (never Selenium Manager: nothing is downloaded).
For each page it checks:

* the browser console has no SEVERE message (script errors, missing CSS/JS/images, ...);
* every internal link (``a[href]`` without a scheme: not http:, mailto:, ...) resolves to
  a file of the site, and a ``#anchor`` to an element with that id in the target page;
* on pages with measurements: a ``table.stepwise-measurements``, an ``img`` inside a
  ``.stepwise-plot`` element that has loaded (``naturalWidth > 0``; every such image),
  code blocks (``div.highlight pre``) and the copy buttons sphinx-copybutton injects
  (``button.copybtn``);
* no two entries of the page's contents (the theme's "on this page" list, ``.toc-drawer .toc-tree``)
  read the same (a launcher's API entry under every step did);
* every run table (``table.stepwise-run``) fits its container: nothing to scroll sideways;
* on index.html: the results table ``table.stepwise-summary`` with at least one body row, a
  link in it that resolves, and one column group per GPU (a header cell of class
  ``stepwise-gpu-group`` each), at least ``--min-gpus`` of them; within the first
  :data:`FIRST_SCREEN_PX` pixels of the page, the words "Start here" and a link to the
  methodology page; and at a phone's width (:data:`PHONE_WINDOW`), every GPU of the results
  table in a table that is shown whole (one per GPU, or any layout that fits the screen).

Prints one line per page and a final "N passed, M failed" line; exits 1 on any failure.

    .venv/bin/python tests/browser/check_site.py --site build/.../html
    .venv/bin/python tests/browser/check_site.py --site DIR --pages-with-measurements elementwise.html

The link and anchor logic is pure (no browser) and tested by tests/browser/test_check_site.py.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

MEASUREMENTS_CLASS = "stepwise-measurements"
PLOT_CLASS = "stepwise-plot"
SUMMARY_CLASS = "stepwise-summary"
GPU_GROUP_CLASS = "stepwise-gpu-group"
#: How far down the front page a reader sees without scrolling, in CSS pixels: "Start here" and the link to the
#: methodology page must be within it.
FIRST_SCREEN_PX = 900
#: The window of the phone-width look at the front page (CSS pixels, width x height).
PHONE_WINDOW = (390, 844)
#: The window of every other look.
DESKTOP_WINDOW = (1280, 1024)
# Pages Sphinx generates that are not chapters.
GENERATED_PAGES = frozenset({"genindex.html", "search.html", "py-modindex.html", "cpp-modindex.html"})


# ---------------------------------------------------------------------------------------
# Pure part: reading HTML, choosing pages, resolving links (tested without a browser)
# ---------------------------------------------------------------------------------------

@dataclass
class PageScan:
    """What the static HTML of a page holds."""

    ids: set[str] = field(default_factory=set)
    hrefs: list[str] = field(default_factory=list)
    classes: set[str] = field(default_factory=set)


class _Scanner(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scan = PageScan()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name == "id":
                self.scan.ids.add(value)
            elif name == "name" and tag == "a":
                self.scan.ids.add(value)  # old-style anchors: <a name="x">
            elif name == "class":
                self.scan.classes.update(value.split())
            elif name == "href" and tag == "a":
                self.scan.hrefs.append(value)

    handle_startendtag = handle_starttag


def scan_html(text: str) -> PageScan:
    """The ids, link targets and classes of an HTML document."""
    scanner = _Scanner()
    scanner.feed(text)
    scanner.close()
    return scanner.scan


def has_measurements(text: str) -> bool:
    """Whether an element of the page has the class ``stepwise-measurements``."""
    return MEASUREMENTS_CLASS in scan_html(text).classes


@dataclass
class SummaryScan:
    """What the front page's results table holds (``found``: there is one)."""

    found: bool = False
    body_rows: int = 0
    gpu_groups: list[str] = field(default_factory=list)  # the GPUs' names, in order
    hrefs: list[str] = field(default_factory=list)


class _SummaryScanner(HTMLParser):
    """Reads the first ``table.stepwise-summary``: its body rows, links and GPU header cells."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scan = SummaryScan()
        self._depth = 0  # tables open inside the summary (0: not in it)
        self._done = False
        self._in_tbody = False
        self._gpu_text: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = set((dict(attrs).get("class") or "").split())
        if tag == "table":
            if self._depth:
                self._depth += 1
            elif not self._done and SUMMARY_CLASS in classes:
                self.scan.found = True
                self._depth = 1
            return
        if not self._depth:
            return
        if tag == "tbody":
            self._in_tbody = True
        elif tag == "tr" and self._in_tbody:
            self.scan.body_rows += 1
        elif tag == "th" and GPU_GROUP_CLASS in classes:
            self._gpu_text = []
        elif tag == "a" and dict(attrs).get("href"):
            self.scan.hrefs.append(dict(attrs)["href"])

    def handle_endtag(self, tag: str) -> None:
        if not self._depth:
            return
        if tag == "table":
            self._depth -= 1
            self._done = self._depth == 0
        elif tag == "tbody":
            self._in_tbody = False
        elif tag == "th" and self._gpu_text is not None:
            self.scan.gpu_groups.append(" ".join("".join(self._gpu_text).split()))
            self._gpu_text = None

    def handle_data(self, data: str) -> None:
        if self._gpu_text is not None:
            self._gpu_text.append(data)


def scan_summary(text: str) -> SummaryScan:
    """The front page's results table (the first ``table.stepwise-summary``) of an HTML document."""
    scanner = _SummaryScanner()
    scanner.feed(text)
    scanner.close()
    return scanner.scan


def summary_problems(site: Path, page: Path, text: str, min_gpus: int = 1,
                     ids_of=None) -> list[str]:
    """Problems with the front page's results table (empty: all good): it must exist, have a
    body row, a link that resolves (see :func:`check_links`) and at least ``min_gpus`` column
    groups, one per GPU."""
    scan = scan_summary(text)
    if not scan.found:
        return [f"no table.{SUMMARY_CLASS} (the results table, from the stepwise-summary directive)"]
    problems = []
    if scan.body_rows == 0:
        problems.append(f"table.{SUMMARY_CLASS} has no body row (no chapter has a headline?)")
    internal = [h for h in scan.hrefs if is_internal(h)]
    kwargs = {} if ids_of is None else {"ids_of": ids_of}
    if not any(not check_links(site, page, [h], **kwargs) for h in internal):
        problems.append(f"table.{SUMMARY_CLASS} has no link that resolves "
                        f"({', '.join(internal) or 'no internal link'})")
    if len(scan.gpu_groups) < min_gpus:
        shown = ", ".join(scan.gpu_groups) or "none"
        problems.append(f"table.{SUMMARY_CLASS} shows {len(scan.gpu_groups)} GPU(s) ({shown}), "
                        f"expected at least {min_gpus} (th.{GPU_GROUP_CLASS})")
    return problems


def contents_problems(entries: list[str]) -> list[str]:
    """Problems with a page's contents, the texts of its entries in order (empty: all good): no two may read the
    same, or the reader cannot tell which section each leads to."""
    seen: dict[str, int] = {}
    for entry in entries:
        text = " ".join(entry.split())
        if text:
            seen[text] = seen.get(text, 0) + 1
    return [f"the page's contents list {text!r} {count} times" for text, count in seen.items() if count > 1]


def overflow_problems(boxes: list[dict], what: str) -> list[str]:
    """Problems with tables that must fit their container: each of ``boxes`` (``caption``, ``scroll_width``,
    ``client_width``, in CSS pixels, of the element that holds the table) wider inside than shown."""
    return [f"{what} {box['caption'] or '(no caption)'!r} overflows its container: {box['scroll_width']} px wide "
            f"in {box['client_width']} px" for box in boxes if box["scroll_width"] > box["client_width"] + 1]


def first_screen_problems(state: dict, limit: int = FIRST_SCREEN_PX) -> list[str]:
    """Problems with the top of the front page: ``state`` holds the page's y (CSS pixels from its top) of the first
    text "Start here" (``start_here``) and of the first link to the methodology page (``methodology``), None for
    one that is not there."""
    problems = []
    for key, what in (("start_here", 'the words "Start here"'), ("methodology", "a link to methodology.html")):
        y = state.get(key)
        if y is None:
            problems.append(f"index.html has no {what}")
        elif y > limit:
            problems.append(f"{what} is {y:.0f} px down index.html, below its first screen ({limit} px)")
    return problems


def narrow_summary_problems(gpus: list[str], tables: list[dict], width: int) -> list[str]:
    """Problems with the results at a phone's width: each GPU of the results table (``gpus``, their names) must be
    in a table shown there (``tables``: each visible table of the results block, its ``text`` and whether it
    ``fits`` the screen and its container) that fits."""
    problems = []
    for gpu in gpus:
        shown = [t for t in tables if gpu in t["text"]]
        if not shown:
            problems.append(f"at {width} px, no table of the results shows {gpu}")
        elif not any(t["fits"] for t in shown):
            problems.append(f"at {width} px, the results of {gpu} are in a table wider than the screen")
    return problems


def pages_to_check(site: Path) -> list[Path]:
    """index.html first, then every other top-level page except Sphinx's generated ones."""
    pages = sorted(p for p in site.glob("*.html")
                   if p.name not in GENERATED_PAGES and not p.name.startswith("_"))
    pages.sort(key=lambda p: p.name != "index.html")
    return pages


def is_internal(href: str) -> bool:
    """A link into the site: no scheme (http:, mailto:, javascript:, ...) and no host."""
    href = href.strip()
    if not href:
        return False
    parts = urlsplit(href)
    return not parts.scheme and not parts.netloc


def resolve_link(site: Path, page: Path, href: str) -> tuple[Path, str]:
    """The file an internal ``href`` on ``page`` points to, and its fragment (unquoted)."""
    parts = urlsplit(href.strip())
    path = unquote(parts.path)
    if not path:
        target = page
    elif path.startswith("/"):
        target = site / path.lstrip("/")
    else:
        target = page.parent / path
    target = Path(os.path.normpath(target))
    if target.is_dir():
        target = target / "index.html"
    return target, unquote(parts.fragment)


@functools.lru_cache(maxsize=None)
def _ids_of_file(path: Path) -> frozenset[str]:
    return frozenset(scan_html(path.read_text(encoding="utf-8", errors="replace")).ids)


def check_links(site: Path, page: Path, hrefs: list[str], ids_of=_ids_of_file) -> list[str]:
    """Problems with the internal links ``hrefs`` found on ``page`` (empty: all good).

    ``ids_of(path)`` gives the element ids of an HTML file (replaceable in tests).
    A fragment is checked only where the target is an HTML page; ``#`` alone and text
    fragments (``#:~:text=``) are not anchors and are not checked.
    """
    site = Path(os.path.normpath(site.resolve()))
    page = Path(os.path.normpath(page.resolve()))
    problems: list[str] = []
    seen: set[str] = set()
    for href in hrefs:
        if href in seen or not is_internal(href):
            continue
        seen.add(href)
        target, fragment = resolve_link(site, page, href)
        if site != target and site not in target.parents:
            problems.append(f"link '{href}' points outside the site ({target})")
            continue
        if not target.is_file():
            problems.append(f"link '{href}': no file {target.relative_to(site)}")
            continue
        if not fragment or fragment.startswith(":~:") or target.suffix.lower() not in (".html", ".htm"):
            continue
        if fragment not in ids_of(target):
            problems.append(f"link '{href}': no element with id '{fragment}' in {target.relative_to(site)}")
    return problems


def is_severe(entry: dict, ignore_favicon: bool = False) -> bool:
    """Whether a browser console entry counts as a failure."""
    if entry.get("level") != "SEVERE":
        return False
    return not (ignore_favicon and "favicon.ico" in entry.get("message", ""))


# ---------------------------------------------------------------------------------------
# Browser part
# ---------------------------------------------------------------------------------------

# One snapshot of what a measurement page must show; polled until complete or timed out,
# since sphinx-copybutton adds its buttons from JavaScript after the page has loaded.
_MEASUREMENT_PROBE_JS = """
const imgs = Array.from(document.querySelectorAll('.%(plot)s img'));
imgs.forEach(i => { if (i.loading === 'lazy') i.loading = 'eager'; });
return {
  tables: document.querySelectorAll('table.%(meas)s, .%(meas)s table').length,
  plots: imgs.length,
  broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
  code: document.querySelectorAll('div.highlight pre').length,
  copy: document.querySelectorAll('button.copybtn').length,
};
""" % {"plot": PLOT_CLASS, "meas": MEASUREMENTS_CLASS}

_HREFS_JS = "return Array.from(document.querySelectorAll('a[href]'), a => a.getAttribute('href'));"

# The theme's (furo's) list of the page's sections, "on this page".
_CONTENTS_JS = "return Array.from(document.querySelectorAll('.toc-drawer .toc-tree a'), a => a.textContent);"

_RUN_TABLES_JS = """
return Array.from(document.querySelectorAll('table.stepwise-run'), t => {
  const box = t.closest('.table-wrapper') || t.parentElement;
  return {caption: t.caption ? t.caption.textContent.trim() : '', scroll_width: box.scrollWidth,
          client_width: box.clientWidth};
});
"""

_FIRST_SCREEN_JS = """
const top = el => el.getBoundingClientRect().top + window.scrollY;
const walker = document.createTreeWalker(document.querySelector('article') || document.body, NodeFilter.SHOW_TEXT);
let start = null;
while (walker.nextNode()) {
  if (walker.currentNode.textContent.includes('Start here')) { start = top(walker.currentNode.parentElement); break; }
}
const link = Array.from(document.querySelectorAll('article a[href]'))
  .find(a => a.getAttribute('href').split('#')[0] === 'methodology.html');
return {start_here: start, methodology: link ? top(link) : null};
"""

_NARROW_SUMMARY_JS = """
return Array.from(document.querySelectorAll('.stepwise-summary-block table'))
  .filter(t => t.offsetParent !== null && t.getBoundingClientRect().width > 0)
  .map(t => {
    const box = t.closest('.table-wrapper') || t.parentElement;
    return {text: t.innerText,
            fits: box.scrollWidth <= box.clientWidth + 1 && t.getBoundingClientRect().right <= window.innerWidth + 1};
  });
"""


def _measurement_problems(state: dict) -> list[str]:
    problems = []
    if state["tables"] == 0:
        problems.append(f"no table.{MEASUREMENTS_CLASS}")
    if state["plots"] == 0:
        problems.append(f"no img inside .{PLOT_CLASS}")
    for src in state["broken"]:
        problems.append(f"plot image did not load: {src}")
    if state["code"] == 0:
        problems.append("no code block (div.highlight pre)")
    if state["copy"] == 0:
        problems.append("no copy button (button.copybtn from sphinx-copybutton)")
    return problems


def make_driver(chromium: str, chromedriver: str, timeout: float, profile_dir: str):
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must never download
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        sys.exit("check_site: selenium is not importable; run with .venv/bin/python (conf/bootstrap.sh)")
    for path, package in ((chromium, "chromium"), (chromedriver, "chromium-driver")):
        if not (Path(path).is_file() and os.access(path, os.X_OK)):
            sys.exit(f"check_site: {path} not found; apt-get install {package} (conf/bootstrap.sh does)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size={},{}".format(*DESKTOP_WINDOW), "--no-first-run", "--disable-extensions",
                f"--user-data-dir={profile_dir}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    driver.set_page_load_timeout(timeout)
    return driver


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (stdlib's signature)
        pass


def start_server(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def check_page(driver, site: Path, page: Path, url: str, expect_measurements: bool,
               wait_s: float, ignore_favicon: bool, min_gpus: int = 1) -> list[str]:
    problems: list[str] = []
    index = page.name == "index.html"
    if index:
        text = page.read_text(encoding="utf-8", errors="replace")
        problems += summary_problems(site, page, text, min_gpus)
        problems += _narrow_summary(driver, url, scan_summary(text).gpu_groups)
    driver.get_log("browser")  # drop whatever an earlier page left behind
    driver.get(url)
    if index:
        problems += first_screen_problems(driver.execute_script(_FIRST_SCREEN_JS))
    problems += contents_problems(driver.execute_script(_CONTENTS_JS) or [])
    problems += overflow_problems(driver.execute_script(_RUN_TABLES_JS) or [], "run table")
    if expect_measurements:
        deadline = time.monotonic() + wait_s
        while True:
            state = driver.execute_script(_MEASUREMENT_PROBE_JS)
            missing = _measurement_problems(state)
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        problems += missing
    problems += check_links(site, page, driver.execute_script(_HREFS_JS) or [])
    for entry in driver.get_log("browser"):
        if is_severe(entry, ignore_favicon):
            problems.append(f"console SEVERE: {entry.get('message', '').strip()}")
    return problems


def _narrow_summary(driver, url: str, gpus: list[str]) -> list[str]:
    """The front page at a phone's width: :func:`narrow_summary_problems` of what it shows there. The window is put
    back to :data:`DESKTOP_WINDOW` afterwards."""
    width, height = PHONE_WINDOW
    driver.set_window_size(width, height)
    try:
        driver.get(url)
        inner = driver.execute_script("return window.innerWidth;")
        return narrow_summary_problems(gpus, driver.execute_script(_NARROW_SUMMARY_JS) or [], inner)
    finally:
        driver.set_window_size(*DESKTOP_WINDOW)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", required=True, type=Path, help="the built site (folder with index.html)")
    ap.add_argument("--pages-with-measurements", nargs="+", metavar="PAGE",
                    help="pages (file names at the site's top level, comma- or space-separated) that must "
                         f"show measurements; default: those whose HTML has an element of class {MEASUREMENTS_CLASS}")
    ap.add_argument("--min-measurement-pages", type=int, default=0,
                    help="fail unless at least this many pages show measurements (default 0)")
    ap.add_argument("--min-gpus", type=int, default=1,
                    help="fail unless index.html's results table (table.stepwise-summary) shows at least "
                         "this many GPUs (default 1)")
    ap.add_argument("--http", action="store_true",
                    help="load the pages from a local HTTP server on 127.0.0.1 instead of file://")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    ap.add_argument("--timeout", type=float, default=30.0, help="page load timeout, seconds")
    ap.add_argument("--wait", type=float, default=5.0,
                    help="how long to wait for images and copy buttons to appear, seconds")
    args = ap.parse_args(argv)

    site = args.site.resolve()
    if not (site / "index.html").is_file():
        print(f"check_site: no index.html in {site}", file=sys.stderr)
        return 1
    pages = pages_to_check(site)
    if args.pages_with_measurements:
        names = [n for item in args.pages_with_measurements for n in item.split(",") if n]
        measured = set(names)
    else:
        measured = {p.name for p in pages if has_measurements(p.read_text(encoding="utf-8", errors="replace"))}

    passed = failed = 0
    for name in sorted(measured - {p.name for p in pages}):
        print(f"FAIL {name}: expected to show measurements, but there is no such page")
        failed += 1
    if len(measured) < args.min_measurement_pages:
        print(f"FAIL site: {len(measured)} page(s) with measurements, expected at least "
              f"{args.min_measurement_pages} (no element of class {MEASUREMENTS_CLASS} found)")
        failed += 1

    server = None
    base = None
    if args.http:
        server, base = start_server(site)
    with tempfile.TemporaryDirectory(prefix="check_site-") as profile:
        driver = make_driver(args.chromium, args.chromedriver, args.timeout, profile)
        try:
            for page in pages:
                url = base + page.name if base else page.as_uri()
                expect = page.name in measured
                try:
                    problems = check_page(driver, site, page, url, expect, args.wait,
                                          ignore_favicon=bool(base), min_gpus=args.min_gpus)
                except Exception as err:  # a page that hangs or crashes the browser is a failure
                    problems = [f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"]
                what = " [measurements]" if expect else ""
                if problems:
                    failed += 1
                    print(f"FAIL {page.name}{what}:")
                    for problem in problems:
                        print(f"     - {problem}")
                else:
                    passed += 1
                    print(f"PASS {page.name}{what}")
        finally:
            driver.quit()
            if server:
                server.shutdown()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
