#!/usr/bin/env python3
"""Sign in to the page `outfit workspaces` serves with the site's OpenID provider, in headless
Chromium: for each --user in turn, open the page, press "Sign in with your organisation's
account", fill the provider's login form, come back signed in, read the catalogue, launch
--manifest (the first user only) and wait for its row, read the rows, and sign out. Prints one
JSON line:

    {"alice": {"catalogue": [...], "launched": NAME, "rows": [...], "signed_out": true},
     "bob": {...}}

Exits 0 on success, 1 on any failure (with what it waited for and what it saw). Reuses
workspace_page.py's Selenium driver (Debian's python3-selenium, for the system python3).

    sign_in.py --url http://127.0.0.1:8080/ --user alice:secret --user bob:secret --manifest web
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from workspace_page import Failure, css_string, drive, page_state, test_sel, wait_for  # noqa: E402


def sign_in(d, url, user, password, seen):
    """Opens the page, goes through the provider's login form, and waits to be back as `user`."""
    d.get(url)

    def provider_link():
        link = d.find(test_sel("signin-provider"))
        return link if link and d.displayed(link) else None

    wait_for("the page to offer the provider's sign-in", provider_link, 30, seen).click()
    # The provider's own page (zitadel/oidc's example login form).
    box = wait_for("the provider's login form", lambda: d.find("input#username"), 30, seen)
    box.send_keys(user)
    d.find("input#password").send_keys(password)
    d.find("button[type=submit]").click()

    def whoami():
        who = d.find(test_sel("whoami"))
        return who and d.displayed(who) and d.text(who).strip() == user

    wait_for(f"the page to show {user!r} signed in", whoami, 30, seen)
    if not d.browser.current_url.startswith(url):
        raise Failure(f"the sign-in came back to {d.browser.current_url}, not {url}")


def catalogue(d, seen):
    def names():
        sel = d.find(test_sel("catalogue-select"))
        values = [d.attr(o, "value") for o in d.find_all("option", root=sel)] if sel else []
        return sorted(v for v in values if v) or None

    return wait_for("the catalogue", names, 30, seen)


def launch(d, manifest, timeout, seen):
    option = d.find(f"[data-test=\"catalogue-select\"] option[value={css_string(manifest)}]")
    option.click()
    form = d.find(test_sel("launch-form"))
    before = d.attr(form, "data-launch-seq")
    d.find(test_sel("launch")).click()

    def launched():
        f = d.find(test_sel("launch-form"))
        if d.attr(f, "data-launch-seq") != before and d.attr(f, "data-launched"):
            return d.attr(f, "data-launched")
        err = d.find(test_sel("form-error"))
        if err and d.displayed(err) and d.text(err).strip():
            raise Failure(f"the launch was refused: {d.text(err).strip()}")
        return None

    name = wait_for("the launch to be accepted", launched, timeout, seen)
    wait_for(f"the row of {name}", lambda: d.find(test_sel("workspace-row", name=name)), timeout, seen)
    return name


def rows(d):
    return sorted(d.attr(r, "data-name") for r in d.find_all(test_sel("workspace-row")))


def sign_out(d, seen):
    d.find(test_sel("signout")).click()

    def offered_again():
        link = d.find(test_sel("signin-provider"))
        return link and d.displayed(link)

    wait_for("the sign-in to be offered again after signing out", offered_again, 30, seen)
    # Gone for good: a reload does not sign in again.
    d.browser.refresh()
    wait_for("the sign-in to be offered after a reload", offered_again, 30, seen)
    return True


def run(d, opts):
    seen = lambda: page_state(d)  # noqa: E731
    summary = {}
    for index, pair in enumerate(opts.user):
        user, _, password = pair.partition(":")
        sign_in(d, opts.url, user, password, seen)
        found = {"catalogue": catalogue(d, seen)}
        if index == 0:
            found["launched"] = launch(d, opts.manifest, opts.timeout, seen)
        found["rows"] = rows(d)
        found["signed_out"] = sign_out(d, seen)
        summary[user] = found
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True, help="the page, e.g. http://127.0.0.1:8080/")
    ap.add_argument("--user", action="append", required=True, metavar="NAME:PASSWORD",
                    help="a user of the provider to sign in as, in turn (repeatable)")
    ap.add_argument("--manifest", required=True, help="the catalogue entry the first user launches")
    ap.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for a launch")
    ap.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    opts = ap.parse_args()

    return drive("sign_in", lambda d: run(d, opts), opts)


if __name__ == "__main__":
    sys.exit(main())
