#!/usr/bin/env python3
"""A user's whole way to a notebook, in headless Chromium: sign in at the backend with the site's
provider, launch a JupyterLab entry on the page, wait for its row to run, follow the row's link
(the workspace's own host, through outfit's proxy and its ticket), and in JupyterLab open a new
notebook, type a cell and run it: the output comes back over the kernel's WebSocket, through the
proxy. Workspaces' hosts (`*.<domain>`) resolve to 127.0.0.1. Prints one JSON line:

    {"workspace": ..., "link": ..., "lab_url": ..., "output": ...}

    jupyterlab.py --backend http://127.0.0.1:8080/ --domain ws.test --user alice:secret \\
        --manifest lab --code 'print(6 * 7)'
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

from sign_in import launch, sign_in  # noqa: E402
from workspace_page import Failure, drive, page_state, test_sel, wait_for  # noqa: E402
from workspace_proxy import ResolvingDriver, text_of  # noqa: E402

# JupyterLab's first load on a busy two-core machine: its bundles are a few megabytes of script.
LAB_LOAD_S = 120
# A new kernel's start and the cell's answer.
CELL_S = 90
# One run of the cell, and how many times it is asked before the test fails.
RUN_S = 20
RUNS = 3


def open_link(d, name, timeout, seen):
    """Waits for the row of `name` to run, then follows its link (in this tab): the link."""
    row = test_sel("workspace-row", name=name)

    def running_link():
        found = d.find(row)
        if found is None:
            return None
        status = d.attr(found, "data-status")
        if status == "failed":
            raise Failure(f"{name} failed: {d.text(found)}")
        link = d.find(test_sel("workspace-url"), root=found)
        return status == "ready" and link is not None and d.attr(link, "href")

    link = wait_for(f"{name} running, with its link", running_link, timeout, seen)
    d.get(link)
    return link


def clicked(d, css):
    """Clicks the element `css` once the page has it and lets it be clicked (JupyterLab lays out
    its panels after adding them: a click before then is refused, and wait_for tries again)."""
    element = d.find(css)
    if element is None:
        return None
    element.click()
    return element


def run_cell(d, code, seen):
    """In JupyterLab: a new notebook from the launcher, `code` typed in its first cell and run
    once its kernel is idle; the cell's output."""
    first = ".jp-NotebookPanel .jp-Cell .cm-content"
    wait_for("JupyterLab's launcher", lambda: clicked(d, '.jp-LauncherCard[data-category="Notebook"]'),
             LAB_LOAD_S, seen)
    wait_for("the new notebook's first cell", lambda: clicked(d, first), CELL_S, seen)
    # CodeMirror closes brackets as they open, and types over a closing one: the text comes out
    # as typed. Run only once the editor shows it all: sent with the typing, the run came before
    # the last keys had reached the cell, an empty cell in two runs of three ("[ ]").
    ActionChains(d.browser).send_keys(code).perform()
    wait_for("the cell to hold the code", lambda: text_of(d, first) == code, CELL_S, seen)
    # And only once the kernel is up: a run asked while the notebook still connects to it is
    # dropped (the cell stays "[ ]" with the kernel idle after; once in CI).
    wait_for("the kernel to be idle", lambda: "| Idle" in (text_of(d, "body") or ""), CELL_S, seen)
    output = lambda: (text_of(d, ".jp-OutputArea-output") or "").strip()  # noqa: E731
    for attempt in range(1, RUNS + 1):
        # Ctrl+Enter runs the cell in place, so asking again runs the same cell.
        wait_for("the first cell", lambda: clicked(d, first), CELL_S, seen)
        ActionChains(d.browser).key_down(Keys.CONTROL).send_keys(Keys.ENTER).key_up(Keys.CONTROL).perform()
        try:
            return wait_for("the cell's output", output, RUN_S, seen)
        except Failure:
            if attempt == RUNS:
                raise


def run(d, opts):
    def seen():
        if "/lab" in d.browser.current_url:
            return f"{d.browser.current_url}: {(text_of(d, 'body') or '')[:600]!r}"
        return page_state(d)

    user, _, password = opts.user.partition(":")
    sign_in(d, opts.backend, user, password, seen)
    name = launch(d, opts.manifest, opts.timeout, seen)
    link = open_link(d, name, opts.timeout, seen)
    output = run_cell(d, opts.code, seen)
    return {"workspace": name, "link": link, "lab_url": d.browser.current_url, "output": output}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", required=True, help="the backend's page, e.g. http://127.0.0.1:8080/")
    ap.add_argument("--domain", required=True, help="the proxy's domain, resolved to 127.0.0.1")
    ap.add_argument("--user", required=True, metavar="NAME:PASSWORD")
    ap.add_argument("--manifest", required=True, help="the catalogue entry of JupyterLab")
    ap.add_argument("--code", required=True, help="the cell to run")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the launch")
    ap.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    opts = ap.parse_args()
    return drive("jupyterlab", lambda d: run(d, opts), opts, driver=ResolvingDriver(opts.domain))


if __name__ == "__main__":
    sys.exit(main())
