#!/usr/bin/env python3
"""Open a workspace through outfit's workspace proxy in headless Chromium: the owner signs in at
the backend with the site's provider, opens the workspace's own host (which sends the browser to
the backend for a ticket and back), and the workspace's page there reaches its app over a
WebSocket through the proxy; then, every cookie cleared, a stranger signs in and opens the same
host, and must be refused; the owner shares the workspace with a group of the stranger's on the
backend's page (its row's Share), and the stranger gets in. Workspaces' hosts (`*.<domain>`) resolve to 127.0.0.1. Prints one
JSON line:

    {"owner": {"user": ..., "echo": ...}, "stranger": {"status_text": ...}, "shared": "Saved",
     "stranger_shared": {"user": ..., "echo": ...}}

    workspace_proxy.py --backend http://127.0.0.1:8080/ --workspace http://web-alice.ws.test:8080/page \\
        --domain ws.test --owner alice:secret --stranger bob:secret --name web-alice --group staff
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sign_in import sign_in  # noqa: E402
from workspace_page import Driver, drive, page_state, test_sel, wait_for  # noqa: E402


def text_of(d, css):
    element = d.find(css)
    return d.text(element).strip() if element else None


def open_workspace(d, opts, seen):
    """Opens the workspace's page and waits for its WebSocket's echo; what the page shows."""
    d.get(opts.workspace)
    echo = wait_for("the workspace's page to echo over its WebSocket",
                    lambda: (text_of(d, "#echo") or "").startswith("echo: ") and text_of(d, "#echo"), 30, seen)
    return {"user": text_of(d, "#user"), "echo": echo, "url": d.browser.current_url}


def share_with_group(d, opts, group, seen):
    """On the backend's page, shares the workspace with `group` through its row's Share."""
    row = test_sel("workspace-row", name=opts.name)
    share = wait_for("the row's Share button", lambda: (b := d.find(row + " " + test_sel("share"))) and d.displayed(b) and b, 30, seen)
    share.click()
    wait_for("the sharing form loaded", lambda: text_of(d, row + " " + test_sel("share-note")) == "", 30, seen)
    groups = d.find(row + " " + test_sel("share-groups"))
    groups.clear()
    groups.send_keys(group)
    d.find(row + " " + test_sel("share-save")).click()
    return wait_for("the share saved", lambda: text_of(d, row + " " + test_sel("share-note")) == "Saved" and "Saved", 30, seen)


def fresh(d, opts, user, seen):
    """Every cookie cleared, `user` (NAME:PASSWORD) signs in at the backend."""
    d.browser.execute_cdp_cmd("Network.clearBrowserCookies", {})
    name, _, password = user.partition(":")
    sign_in(d, opts.backend, name, password, seen)


def run(d, opts):
    seen = lambda: f"{d.browser.current_url}: {page_state(d)} / {text_of(d, 'body')!r}"  # noqa: E731
    fresh(d, opts, opts.owner, seen)
    summary = {"owner": open_workspace(d, opts, seen)}

    fresh(d, opts, opts.stranger, seen)
    d.get(opts.workspace)
    refused = wait_for("the stranger to be refused", lambda: "may not open" in (text_of(d, "body") or "") and text_of(d, "body"), 30, seen)
    summary["stranger"] = {"status_text": refused, "echo": text_of(d, "#echo")}

    fresh(d, opts, opts.owner, seen)
    summary["shared"] = share_with_group(d, opts, opts.group, seen)
    fresh(d, opts, opts.stranger, seen)
    summary["stranger_shared"] = open_workspace(d, opts, seen)
    return summary


class ResolvingDriver(Driver):
    """A Driver whose Chromium resolves every host under `domain` to 127.0.0.1."""

    def __init__(self, domain):
        super().__init__()
        self.domain = domain

    def start(self, chromedriver, chromium):
        self.extra_args = [f"--host-resolver-rules=MAP *.{self.domain} 127.0.0.1"]
        super().start(chromedriver, chromium)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", required=True, help="the backend's page, e.g. http://127.0.0.1:8080/")
    ap.add_argument("--workspace", required=True, help="a page of the workspace's host")
    ap.add_argument("--domain", required=True, help="the proxy's domain, resolved to 127.0.0.1")
    ap.add_argument("--owner", required=True, metavar="NAME:PASSWORD")
    ap.add_argument("--stranger", required=True, metavar="NAME:PASSWORD")
    ap.add_argument("--name", required=True, help="the workspace's name, as the backend's page lists it")
    ap.add_argument("--group", required=True, help="a group of the stranger's, to share the workspace with")
    ap.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    opts = ap.parse_args()
    return drive("workspace_proxy", lambda d: run(d, opts), opts, driver=ResolvingDriver(opts.domain))


if __name__ == "__main__":
    sys.exit(main())
