"""A real browser for bridge/cli/tests/ui_browser.rs: Playwright (PyPI, pinned in
bridge/tests/requirements-ui.txt) driving Debian's chromium, one launch for the whole file.

The Rust test owns the bridge, the hook shim and the emitters; this process owns the
page. It reads one JSON command per line on stdin and answers one JSON line on stdout:
{"ok": true, "value": ...} or {"ok": false, "error": "..."}. The first line it prints is
{"ready": true}, or {"skip": "why"} when playwright or chromium is missing.

Every dialog the page opens is recorded (and dismissed): hostile event content must never
open one. Pages are named ("main" unless a command says `page`); `tab` opens another one in
the same context, which puts the first in the background.

The page's Content-Security-Policy forbids eval, so conditions are polled with `evaluate`
(which the policy does not govern) rather than `wait_for_function`. Timings come from the
page's own Performance API (`performance.mark`/`now`, paint entries) and Chromium's
`Performance.getMetrics` (task and script time), read by the Rust side.
"""

import json
import os
import sys
import time

# Records each desktop notification the page shows, then shows it (the real constructor).
NOTIFY_SPY = """
(() => {
  const Real = window.Notification;
  if (!Real) return;
  window.__notes = [];
  const Spy = function (title, opts) { window.__notes.push({ title, body: (opts || {}).body || "" }); return new Real(title, opts); };
  Spy.requestPermission = (...a) => Real.requestPermission(...a);
  Object.defineProperty(Spy, "permission", { get: () => Real.permission });
  Spy.prototype = Real.prototype;
  window.Notification = Spy;
})();
"""


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        out({"skip": f"playwright is not installed ({e}); pip install -r bridge/tests/requirements-ui.txt"})
        return
    chromium = os.environ.get("AEP_UI_CHROMIUM", "/usr/bin/chromium")
    if not os.path.exists(chromium):
        out({"skip": f"{chromium} is not installed (apt-get install chromium)"})
        return
    with sync_playwright() as p:
        # Extra switches from the Rust side (AEP_UI_BROWSER_ARGS, a JSON list), e.g. a
        # --host-resolver-rules that maps a name to 127.0.0.1 the way DNS rebinding does.
        extra = json.loads(os.environ.get("AEP_UI_BROWSER_ARGS", "[]"))
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"] + extra)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_init_script(NOTIFY_SPY)
        dialogs = []
        errors = []
        pages = {}
        cdp = {}

        def on_dialog(d):
            dialogs.append(d.message)
            d.dismiss()

        def open_page(name):
            pg = context.new_page()
            pg.on("dialog", on_dialog)
            pg.on("pageerror", lambda e: errors.append(f"{name}: {e}"))
            pages[name] = pg
            return pg

        open_page("main")
        out({"ready": True})
        for line in sys.stdin:
            if not line.strip():
                continue
            cmd = json.loads(line)
            op = cmd["op"]
            timeout = cmd.get("timeout_ms", 15000)
            page = pages.get(cmd.get("page", "main"))
            try:
                value = None
                if op == "tab":
                    page = open_page(cmd["name"])
                    if "url" in cmd:
                        page.goto(cmd["url"])
                    page.bring_to_front()
                elif op == "front":
                    page.bring_to_front()
                elif op == "real_focus":
                    # Playwright tells every page it has focus; this page learns the truth
                    # (another tab in front takes it), as a user's browser would say.
                    name = cmd.get("page", "main")
                    if name not in cdp:
                        cdp[name] = context.new_cdp_session(page)
                        cdp[name].send("Performance.enable")
                    cdp[name].send("Emulation.setFocusEmulationEnabled", {"enabled": False})
                elif op == "grant":
                    context.grant_permissions(cmd["permissions"])
                elif op == "reload":
                    page.reload()
                elif op == "title":
                    value = page.title()
                elif op == "metrics":
                    # Chromium's own counters of this page's main thread (cumulative seconds).
                    name = cmd.get("page", "main")
                    if name not in cdp:
                        cdp[name] = context.new_cdp_session(page)
                        cdp[name].send("Performance.enable")
                    value = {m["name"]: m["value"] for m in cdp[name].send("Performance.getMetrics")["metrics"]}
                elif op == "sleep":
                    # A measured window of idleness, not a wait for a condition.
                    page.wait_for_timeout(cmd["ms"])
                elif op == "goto":
                    resp = page.goto(cmd["url"])
                    value = resp.status if resp else None
                elif op == "wait":
                    # A selector present (and, with `text`, containing it).
                    loc = page.locator(cmd["selector"])
                    if "text" in cmd:
                        loc = loc.filter(has_text=cmd["text"])
                    loc.first.wait_for(state=cmd.get("state", "visible"), timeout=timeout)
                elif op == "click":
                    page.locator(cmd["selector"]).first.click(timeout=timeout)
                elif op == "fill":
                    page.locator(cmd["selector"]).first.fill(cmd["value"], timeout=timeout)
                elif op == "select":
                    page.locator(cmd["selector"]).first.select_option(cmd["value"], timeout=timeout)
                elif op == "check":
                    page.locator(cmd["selector"]).first.check(timeout=timeout)
                elif op == "text":
                    value = page.locator(cmd["selector"]).first.text_content(timeout=timeout)
                elif op == "eval":
                    value = page.evaluate(cmd["js"], cmd.get("arg"))
                elif op == "wait_js":
                    end = time.monotonic() + timeout / 1000
                    while not page.evaluate(cmd["js"]):
                        if time.monotonic() > end:
                            raise TimeoutError(f"still false after {timeout} ms: {cmd['js']}")
                        time.sleep(0.05)
                elif op == "screenshot":
                    os.makedirs(os.path.dirname(cmd["path"]), exist_ok=True)
                    page.screenshot(path=cmd["path"], full_page=cmd.get("full", True))
                elif op == "dialogs":
                    value = dialogs
                elif op == "errors":
                    value = errors
                elif op == "quit":
                    out({"ok": True})
                    break
                else:
                    raise ValueError(f"unknown op {op}")
                out({"ok": True, "value": value})
            except Exception as e:  # the Rust side reports it with the step
                out({"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]})
        browser.close()


if __name__ == "__main__":
    main()
