"""A page opened in headless Chromium (Debian's ``chromium``), driven over the DevTools protocol
through a pipe (``--remote-debugging-pipe``: JSON messages ended by a NUL byte on descriptors 3
and 4), so no WebSocket library is needed.

:func:`open_page` loads a file and gives what a test asks of it: every request the page made,
every console message and uncaught exception, values computed in the page, a PDF printed on A4
and a screenshot. The browser runs with a fresh profile and with its own background traffic
(updates, sync, component downloads) off, so a request it records is the page's.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)


def chromium() -> str | None:
    """The Chromium executable, or None when it is not installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(RuntimeError):
    pass


@dataclass
class Page:
    """A page loaded in Chromium, and what it did while it loaded."""

    _browser: _Browser
    session: str
    url: str
    requests: list[str] = field(default_factory=list)
    console: list[dict[str, Any]] = field(default_factory=list)
    exceptions: list[dict[str, Any]] = field(default_factory=list)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression evaluated in the page (by DevTools: the page
        itself runs no script)."""
        answer = self._browser.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            self.session,
        )
        if "exceptionDetails" in answer:
            raise BrowserError(f"{expression[:80]}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def pdf(self) -> bytes:
        """The page printed as the browser prints it, on A4 unless its CSS says otherwise."""
        answer = self._browser.call(
            "Page.printToPDF",
            {"paperWidth": 8.27, "paperHeight": 11.69, "preferCSSPageSize": True,
             "printBackground": True},
            self.session,
        )  # fmt: skip
        return base64.b64decode(answer["data"])

    def screenshot(self, width: int = 1000, height: int | None = None) -> bytes:
        """A PNG of the page at ``width`` CSS pixels, the whole page or its first ``height``."""
        full = self.evaluate("document.documentElement.scrollHeight")
        height = min(int(full), height) if height else int(full)
        self._browser.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            self.session,
        )
        answer = self._browser.call("Page.captureScreenshot", {"format": "png"}, self.session)
        return base64.b64decode(answer["data"])

    @property
    def errors(self) -> list[str]:
        """Console messages of level error or warning, and uncaught exceptions, as text."""
        said = [
            f"{m.get('level', m.get('type'))}: {m.get('text', m.get('args'))}"
            for m in self.console
            if m.get("level", m.get("type")) in ("error", "warning", "assert")
        ]
        return said + [json.dumps(e)[:300] for e in self.exceptions]


class _Browser:
    def __init__(self, executable: str, profile: Path) -> None:
        commands_r, self._commands_w = os.pipe()
        self._answers_r, answers_w = os.pipe()

        def descriptors() -> None:
            # Moved above 4 first: a pipe end may itself be descriptor 3 or 4.
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (commands_r, answers_w)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=descriptors,
            close_fds=False,
        )
        os.close(commands_r)
        os.close(answers_w)
        self._next = 0
        self._pending = b""
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any], session: str | None = None) -> int:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._commands_w, data) :]
        return self._next

    def receive(self, timeout: float) -> dict[str, Any]:
        ends = time.monotonic() + timeout
        while b"\0" not in self._pending:
            left = ends - time.monotonic()
            ready, _, _ = select.select([self._answers_r], [], [], max(left, 0))
            if not ready:
                raise BrowserError(f"Chromium said nothing for {timeout} s")
            chunk = os.read(self._answers_r, 1 << 16)
            if not chunk:
                raise BrowserError("Chromium closed the DevTools pipe")
            self._pending += chunk
        raw, _, self._pending = self._pending.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(
        self, method: str, params: dict[str, Any], session: str | None = None, timeout: float = 60
    ) -> dict[str, Any]:
        """Send a command and wait for its answer; events that arrive meanwhile are kept."""
        wanted = self.send(method, params, session)
        while True:
            message = self.receive(timeout)
            if message.get("id") == wanted:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self.events.append(message)

    def wait_for(self, method: str, session: str, timeout: float = 60) -> dict[str, Any]:
        for i, event in enumerate(self.events):
            if event["method"] == method and event.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            message = self.receive(timeout)
            if message.get("method") == method and message.get("sessionId") == session:
                return message
            if "method" in message:
                self.events.append(message)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._commands_w)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        with contextlib.suppress(OSError):
            os.close(self._answers_r)


@contextlib.contextmanager
def open_page(path: Path, *, scripts: bool = False) -> Iterator[Page]:
    """``path`` loaded in a fresh headless Chromium; with ``scripts`` False the page's own
    scripts are disabled, so what it shows is what it shows without any."""
    executable = chromium()
    if executable is None:
        raise BrowserError("chromium is not installed (apt-get install chromium)")
    profile = Path(tempfile.mkdtemp(prefix="qadvisor-chromium-"))
    browser = _Browser(executable, profile)
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.call(f"{domain}.enable", {}, session)
        if not scripts:
            browser.call("Emulation.setScriptExecutionDisabled", {"value": True}, session)
        url = path.resolve().as_uri()
        page = Page(browser, session, url)
        browser.call("Page.navigate", {"url": url}, session)
        browser.wait_for("Page.loadEventFired", session)
        # What the page did up to its load, and anything still arriving a moment after it.
        ends = time.monotonic() + 0.5
        while time.monotonic() < ends:
            try:
                browser.events.append(browser.receive(max(ends - time.monotonic(), 0.01)))
            except BrowserError:
                break
        for event in browser.events:
            if event.get("sessionId") != session:
                continue
            params = event.get("params", {})
            if event["method"] == "Network.requestWillBeSent":
                page.requests.append(params["request"]["url"])
            elif event["method"] == "Runtime.consoleAPICalled":
                page.console.append({"type": params.get("type"), "args": params.get("args")})
            elif event["method"] == "Log.entryAdded":
                page.console.append(params["entry"])
            elif event["method"] == "Runtime.exceptionThrown":
                page.exceptions.append(params["exceptionDetails"])
        yield page
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)
