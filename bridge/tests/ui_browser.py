"""A real browser for bridge/cli/tests/ui_browser.rs: Playwright (PyPI, pinned in
bridge/tests/requirements-ui.txt) driving Debian's chromium, one launch for the whole file.

The Rust test owns the bridge, the hook shim and the emitters; this process owns the
page. It reads one JSON command per line on stdin and answers one JSON line on stdout:
{"ok": true, "value": ...} or {"ok": false, "error": "..."}. The first line it prints is
{"ready": true}, or {"skip": "why"} when playwright or chromium is missing.

Every dialog the page opens is recorded (and dismissed): hostile event content must never
open one.
"""

import json
import os
import sys


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
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        dialogs = []
        errors = []

        def on_dialog(d):
            dialogs.append(d.message)
            d.dismiss()

        page.on("dialog", on_dialog)
        page.on("pageerror", lambda e: errors.append(str(e)))
        out({"ready": True})
        for line in sys.stdin:
            if not line.strip():
                continue
            cmd = json.loads(line)
            op = cmd["op"]
            timeout = cmd.get("timeout_ms", 15000)
            try:
                value = None
                if op == "goto":
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
                    value = page.evaluate(cmd["js"])
                elif op == "wait_js":
                    page.wait_for_function(cmd["js"], timeout=timeout)
                elif op == "screenshot":
                    os.makedirs(os.path.dirname(cmd["path"]), exist_ok=True)
                    page.screenshot(path=cmd["path"], full_page=True)
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
