#!/usr/bin/env python3
"""Drive the page `outfit workspaces` serves at `/` in headless Chromium, end to end.

Starts chromedriver, opens the page, signs in (when the page asks), launches a workspace from
the catalogue, follows its live progress until it is ready, optionally takes a screenshot, stops
it (its row turns `stopped`) and starts it again (ready again, same name), deletes it and follows
the delete until it is gone. Prints one JSON line:

    {"workspace": NAME, "first_progress_ms": ..., "ready_ms": ..., "stopped_ms": ...,
     "restarted_ms": ..., "deleted_ms": ..., "refused_error": ...}

With --refused MANIFEST it first launches that entry, which the API must refuse, and waits for
the page to show the refusal under the form: refused_error is the text shown (else null).

first_progress_ms and ready_ms count from the click on Launch, stopped_ms from the click on Stop,
restarted_ms from the click on Start, deleted_ms from the click that confirms the delete. Exits 0 on success, 1 on any failure (with what it waited for, what it saw and
the browser's console log).

It drives Chromium through chromedriver with Selenium (Debian's python3-selenium, for the system
python3), and finds everything through the page's `data-test` attributes.

    workspace_page.py --url http://127.0.0.1:8080/ --token "$TOKEN" --manifest jupyter \\
        --field jupyter/FILE=notes.ipynb --screenshot /tmp/page.png
"""

import argparse
import base64
import json
import os
import shutil
import sys
import tempfile
import time

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.by import By

POLL_S = 0.05


class Failure(Exception):
    """The page did not do what was expected; the message says what and what was seen."""


def css_string(value):
    """A CSS string literal for an attribute selector."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def test_sel(hook, **attrs):
    """The selector of a `data-test` hook, with `data-KEY` attributes to match."""
    sel = f"[data-test={css_string(hook)}]"
    for key, value in attrs.items():
        sel += f"[data-{key}={css_string(value)}]"
    return sel


def choose(d, option, hook, value):
    """Picks `option` (of value `value`) in the select with `data-test` `hook`."""
    option.click()
    select = d.find(test_sel(hook))
    if select.get_property("value") != value:
        # Some drivers don't fire change on an option click: set it the way a user would.
        d.script("const s = arguments[0]; s.value = arguments[1]; s.dispatchEvent(new Event('change', {bubbles: true}));",
                 select, value)


class Driver:
    """A Selenium session in headless Chromium, with the few helpers the test needs."""

    def __init__(self):
        self.extra_args = []  # more Chromium flags, for a subclass
        self.browser = None
        self.profile = tempfile.mkdtemp(prefix="outfit-browser-")
        self.driver_log = os.path.join(self.profile, "chromedriver.log")

    def start(self, chromedriver, chromium):
        if not os.access(chromedriver, os.X_OK):
            raise Failure(f"chromedriver not found or not executable at {chromedriver}")
        if not os.access(chromium, os.X_OK):
            raise Failure(f"chromium not found or not executable at {chromium}")
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                    "--window-size=1280,900", f"--user-data-dir={os.path.join(self.profile, 'profile')}",
                    *self.extra_args):
            options.add_argument(arg)
        options.page_load_strategy = "normal"
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        service = Service(chromedriver, service_args=["--allowed-ips=127.0.0.1", f"--log-path={self.driver_log}"])
        try:
            self.browser = webdriver.Chrome(service=service, options=options)
        except WebDriverException as e:
            raise Failure(f"chromedriver did not start a session: {e.msg}; log: {self.tail_log()}") from e

    @property
    def session(self):
        return self.browser is not None

    def tail_log(self, n=2000):
        try:
            with open(self.driver_log, "rb") as f:
                data = f.read()
            return data[-n:].decode("utf-8", "replace")
        except OSError:
            return "(no log)"

    def get(self, url):
        self.browser.get(url)

    def find_all(self, css, root=None):
        return (root or self.browser).find_elements(By.CSS_SELECTOR, css)

    def find(self, css, root=None):
        found = self.find_all(css, root)
        return found[0] if found else None

    @staticmethod
    def attr(elem, name):
        return elem.get_dom_attribute(name)

    @staticmethod
    def text(elem):
        return elem.text

    @staticmethod
    def displayed(elem):
        return elem.is_displayed()

    def script(self, source, *args):
        return self.browser.execute_script(source, *args)

    def park_pointer(self):
        """Moves the pointer to the corner so that no button is shown hovered."""
        actions = ActionBuilder(self.browser)
        actions.pointer_action.move_to_location(0, 0)
        actions.perform()

    def screenshot(self):
        """A PNG of the whole page (through Chromium's DevTools), or of the window."""
        try:
            size = self.browser.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
            shot = self.browser.execute_cdp_cmd("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
            })
            return base64.b64decode(shot["data"])
        except (WebDriverException, KeyError, TypeError):
            return self.browser.get_screenshot_as_png()

    def console(self):
        try:
            return [f"{e.get('level')}: {e.get('message')}" for e in self.browser.get_log("browser")]
        except WebDriverException:
            return None

    def quit(self):
        if self.browser:
            try:
                self.browser.quit()
            except Exception:  # noqa: BLE001 -- best effort on the way out
                pass
            self.browser = None
        shutil.rmtree(self.profile, ignore_errors=True)


def wait_for(what, check, timeout, seen=lambda: ""):
    """Polls check() until it returns something true; Failure naming what and what was seen."""
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            got = check()
            if got:
                return got
        except WebDriverException as e:  # e.g. a stale element while the page re-renders
            last_error = e
        if time.monotonic() > deadline:
            saw = ""
            try:
                saw = seen()
            except Exception as e:  # noqa: BLE001
                saw = f"(could not read the page: {e})"
            extra = f"; last WebDriver error: {last_error}" if last_error else ""
            raise Failure(f"timed out after {timeout:.0f} s waiting for {what}; saw: {saw or '(nothing)'}{extra}")
        time.sleep(POLL_S)


def page_state(d):
    """What the page shows now, for failure messages."""
    return d.script("""
        const q = (s) => Array.from(document.querySelectorAll(s));
        const vis = (e) => e && !e.hidden && e.offsetParent !== null;
        const t = (s) => { const e = document.querySelector(s); return e && vis(e) ? e.textContent.trim() : null; };
        return JSON.stringify({
          url: location.href,
          whoami: t('[data-test="whoami"]'),
          signin: vis(document.querySelector('[data-test="signin-token"]')),
          signinError: t('[data-test="signin-error"]'),
          banner: t('[data-test="banner"]'),
          formError: t('[data-test="form-error"]'),
          listError: t('[data-test="list-error"]'),
          rows: q('[data-test="workspace-row"]').map(r => r.dataset.name + ":" + r.dataset.status),
          progress: q('[data-test="progress"]').map(p => ({workspace: p.dataset.workspace, status: p.dataset.status,
            percent: p.dataset.percent, text: p.innerText.replace(/\\s+/g, " ").slice(0, 400)})),
        });
    """)


def parse_fields(values):
    fields = []
    for v in values:
        key, sep, value = v.partition("=")
        container, slash, name = key.partition("/")
        if not sep or not slash or not container or not name:
            raise SystemExit(f"--field wants container/NAME=value, got {v!r}")
        fields.append((container, name, value))
    return fields


def choose_entry(d, manifest, seen):
    """Chooses catalogue entry `manifest` in the launch form, once the catalogue is loaded."""
    def catalogue_option():
        sel = d.find(test_sel("catalogue-select"))
        if not sel:
            return None
        option = d.find(f"option[value={css_string(manifest)}]", root=sel)
        if option:
            return option
        names = [d.attr(o, "value") for o in d.find_all("option", root=sel)]
        names = [n for n in names if n]
        if names:  # the catalogue is loaded and the entry is not in it
            raise Failure(f"catalogue entry {manifest!r} is not offered; the catalogue has: {', '.join(names)}")
        return None

    option = wait_for(f"catalogue entry {manifest!r} in the select", catalogue_option, 30, seen)
    if d.attr(option, "disabled") is not None:
        raise Failure(f"catalogue entry {manifest!r} can't be launched: {d.text(d.find(test_sel('entry-error'))) if d.find(test_sel('entry-error')) else ''}")
    choose(d, option, "catalogue-select", manifest)


def refused_launch(d, manifest, seen):
    """Launches `manifest`, which the API refuses; the error the page shows under the form."""
    choose_entry(d, manifest, seen)
    form = d.find(test_sel("launch-form"))
    seq_before = d.attr(form, "data-launch-seq")
    d.find(test_sel("launch")).click()

    def shown_error():
        f = d.find(test_sel("launch-form"))
        if d.attr(f, "data-launch-seq") != seq_before:
            raise Failure(f"the launch of {manifest!r} was accepted; it should have been refused")
        err = d.find(test_sel("form-error"))
        if d.attr(f, "data-busy") == "true" or not (err and d.displayed(err)):
            return None
        return d.text(err).strip() or None

    return wait_for(f"the refusal of {manifest!r} under the form (form-error)", shown_error, 30, seen)


def run(d, opts):
    fields = parse_fields(opts.field)
    timeout = opts.timeout
    seen = lambda: page_state(d)  # noqa: E731

    # a. open the page and sign in when it asks.
    d.get(opts.url)

    def signed_in_or_form():
        who = d.find(test_sel("whoami"))
        if who and d.displayed(who) and d.text(who).strip():
            return "in"
        tok = d.find(test_sel("signin-token"))
        if tok and d.displayed(tok):
            return "form"
        return None

    where = wait_for("the page to show who is signed in or the sign-in form", signed_in_or_form, 30, seen)
    if where == "form":
        if not opts.token:
            raise Failure("the page asks for a token and no --token was given")
        tok = d.find(test_sel("signin-token"))
        tok.clear()
        tok.send_keys(opts.token)
        d.find(test_sel("signin-submit")).click()

    def whoami():
        err = d.find(test_sel("signin-error"))
        if err and d.displayed(err) and d.text(err).strip():
            raise Failure(f"sign-in was refused: {d.text(err).strip()}")
        who = d.find(test_sel("whoami"))
        if not (who and d.displayed(who)):
            return None
        text = d.text(who).strip()
        if not text:
            return None
        if opts.expect_user and opts.expect_user not in text:
            return None
        return text

    what = f"whoami to show {opts.expect_user!r}" if opts.expect_user else "whoami to show a user"
    wait_for(what, whoami, 30, seen)

    # b. when asked, launch an entry the API refuses: the page shows the API's error under the
    # form, and nothing is launched.
    refused_error = refused_launch(d, opts.refused, seen) if opts.refused else None

    # c. pick the catalogue entry, fill the fields, launch.
    choose_entry(d, opts.manifest, seen)
    for container, name, value in fields:
        sel = test_sel(f"field-{container}-{name}")
        box = wait_for(f"the input {sel}", lambda: d.find(sel), 10, seen)
        box.clear()
        if value:
            box.send_keys(value)
        got = box.get_property("value")
        if got != value:
            raise Failure(f"the input {sel} holds {got!r} after typing {value!r}")

    if opts.cluster:
        def cluster_option():
            sel = d.find(test_sel("cluster-select"))
            if not (sel and d.displayed(sel)):
                return None
            return d.find(f"option[value={css_string(opts.cluster)}]", root=sel)

        option = wait_for(f"cluster {opts.cluster!r} offered in the launch form", cluster_option, 30, seen)
        if d.attr(option, "disabled") is not None:
            raise Failure(f"cluster {opts.cluster!r} is offered but can't be chosen")
        choose(d, option, "cluster-select", opts.cluster)

    form = d.find(test_sel("launch-form"))
    seq_before = d.attr(form, "data-launch-seq") if form else None
    launch = d.find(test_sel("launch"))
    if not launch:
        raise Failure(f"no launch button; saw: {seen()}")
    t0 = time.monotonic()
    launch.click()

    def launched():
        f = d.find(test_sel("launch-form"))
        if f and d.attr(f, "data-launch-seq") != seq_before and d.attr(f, "data-launched"):
            return d.attr(f, "data-launched")
        err = d.find(test_sel("form-error"))
        if f and d.attr(f, "data-busy") != "true" and err and d.displayed(err) and d.text(err).strip():
            raise Failure(f"the launch was refused: {d.text(err).strip()}")
        return None

    name = wait_for("the launch to be accepted (launch-form data-launched)", launched, timeout, seen)

    # d. follow the progress until ready.
    psel = test_sel("progress", workspace=name)
    first_progress = None
    ready_at = None
    deadline_left = lambda: max(1.0, timeout - (time.monotonic() - t0))  # noqa: E731

    def until_ready():
        nonlocal first_progress
        p = d.find(psel)
        if not p:
            return None
        if first_progress is None and d.attr(p, "data-percent") is not None:
            first_progress = time.monotonic()
        status = d.attr(p, "data-status")
        if status == "failed":
            outcome = d.find(test_sel("progress-outcome"), root=p)
            steps = [f"{d.attr(li, 'data-step')}={d.attr(li, 'data-state')}" for li in d.find_all(test_sel("progress-step"), root=p)]
            said = " ".join((d.text(outcome) if outcome else d.text(p)).split())
            raise Failure(f"workspace {name} failed to start: {said} (steps: {', '.join(steps)})")
        if status == "ready":
            if first_progress is None:
                first_progress = time.monotonic()
            return True
        return None

    wait_for(f"progress {psel} to reach data-status=ready", until_ready, deadline_left(), seen)
    ready_at = time.monotonic()
    rsel = test_sel("workspace-row", name=name)
    wait_for(f"row {rsel} with data-status=ready",
             lambda: any(d.attr(r, "data-status") == "ready" for r in d.find_all(rsel)), 15, seen)
    if opts.cluster:
        def on_cluster():
            row = d.find(rsel)
            where = d.find(test_sel("row-cluster"), root=row) if row else None
            return where is not None and d.displayed(where) and d.text(where).strip() == f"on {opts.cluster}"
        wait_for(f"row {rsel} to say it runs on {opts.cluster!r}", on_cluster, 15, seen)

    # e. the screenshot, taken while the workspace is ready.
    if opts.screenshot:
        d.script("window.scrollTo(0, 0); document.activeElement && document.activeElement.blur();")
        try:
            d.park_pointer()
        except WebDriverException:
            pass
        time.sleep(0.6)  # let the bar's last transition finish
        png = d.screenshot()
        with open(opts.screenshot, "wb") as f:
            f.write(png)

    # f. stop it: the row turns stopped (its pod gone, the workspace kept); start it: the same
    # row turns ready again, its progress followed.
    def row_status(status):
        return lambda: any(d.attr(r, "data-status") == status for r in d.find_all(rsel))

    row = d.find(rsel)
    stop = d.find(test_sel("stop"), root=row)
    if not stop or not d.displayed(stop):
        raise Failure(f"no Stop button in row {rsel}; saw: {seen()}")
    t_stop = time.monotonic()
    stop.click()
    wait_for(f"row {rsel} with data-status=stopped", row_status("stopped"), timeout, seen)
    stopped_ms = round((time.monotonic() - t_stop) * 1000)
    row = d.find(rsel)
    start = d.find(test_sel("start"), root=row)
    if not start or not d.displayed(start):
        raise Failure(f"no Start button in the stopped row {rsel}; saw: {seen()}")
    t_start = time.monotonic()
    start.click()
    wait_for(f"row {rsel} to leave data-status=stopped", lambda: not row_status("stopped")(), 30, seen)
    wait_for(f"progress {psel} and row {rsel} with data-status=ready",
             lambda: row_status("ready")() and d.attr(d.find(psel), "data-status") == "ready", timeout, seen)
    restarted_ms = round((time.monotonic() - t_start) * 1000)

    # g. delete it and follow the delete until the row is gone.
    row = d.find(rsel)
    button = d.find(test_sel("delete"), root=row)
    if not button:
        raise Failure(f"no delete button in row {rsel}; saw: {seen()}")
    button.click()
    t1 = time.monotonic()
    confirm = d.find(test_sel("delete-confirm"), root=row)
    if confirm and d.displayed(confirm):
        confirm.click()
        t1 = time.monotonic()

    def deleted():
        p = d.find(psel)
        status = d.attr(p, "data-status") if p else None
        if status == "deleted" and not d.find_all(rsel):
            return True
        return None

    wait_for(f"progress {psel} to reach data-status=deleted and row {rsel} to go", deleted, timeout, seen)
    t2 = time.monotonic()

    return {
        "workspace": name,
        "first_progress_ms": round((first_progress - t0) * 1000),
        "ready_ms": round((ready_at - t0) * 1000),
        "stopped_ms": stopped_ms,
        "restarted_ms": restarted_ms,
        "deleted_ms": round((t2 - t1) * 1000),
        "refused_error": refused_error,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True, help="the page, e.g. http://127.0.0.1:8080/")
    ap.add_argument("--token", help="Kubernetes token to sign in with when the page asks")
    ap.add_argument("--expect-user", help="whoami must show this user")
    ap.add_argument("--manifest", required=True, help="the catalogue entry to launch")
    ap.add_argument("--cluster", help="choose this cluster in the launch form; the row must show it")
    ap.add_argument("--refused", metavar="MANIFEST",
                    help="first launch this catalogue entry, which the API refuses: the page must show its error")
    ap.add_argument("--field", action="append", default=[], metavar="container/NAME=value",
                    help="a setting to fill in (repeatable)")
    ap.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for ready, and for deleted")
    ap.add_argument("--screenshot", help="write a PNG of the page when the workspace is ready")
    ap.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    opts = ap.parse_args()

    return drive("workspace_page", lambda d: run(d, opts), opts)


def drive(name, session, opts, driver=None):
    """Runs `session(driver)` in a new headless Chromium (`driver`, a Driver by default) and
    prints its summary as one JSON line; 0 on success, 1 with what failed and the browser's
    console on stderr."""
    d = None
    code = 1
    try:
        d = driver or Driver()
        d.start(opts.chromedriver, opts.chromium)
        summary = session(d)
        print(json.dumps(summary), flush=True)
        code = 0
    except Exception as e:  # noqa: BLE001 -- every failure is reported the same way
        what = str(e) if isinstance(e, Failure) else f"{type(e).__name__}: {e}"
        print(f"{name}: FAILED: {what}", file=sys.stderr)
        if d and d.session:
            try:
                logs = d.console()
            except Exception:  # noqa: BLE001
                logs = None
            if logs is None:
                print("browser console: (not available)", file=sys.stderr)
            else:
                print("browser console:" + ("" if logs else " (empty)"), file=sys.stderr)
                for line in logs:
                    print("  " + line, file=sys.stderr)
        elif d:
            print("chromedriver log tail:\n" + d.tail_log(), file=sys.stderr)
    finally:
        if d:
            d.quit()
    return code


if __name__ == "__main__":
    sys.exit(main())
