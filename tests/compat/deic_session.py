#!/usr/bin/env python3
"""Drive one full user_pods session against a running backend and check it.

This is an independent compatibility check for outfit's workspace backend.
It was written from the API's documentation only -- deic-dk/kubernetes_backend's
README (seed 004) and the reference notes in workspaces.md §1.1-1.3 and §1.10,
in particular the exact shapes in §1.2 -- and NOT from outfit's code.  Where
outfit documents a deliberate difference from deic-dk (empty lists are `[]`,
failures keep the endpoint's field and add an "error" string, 404/405/400 for
unknown paths / wrong methods / malformed JSON, get_podip_owner's 400 carries a
text message) the outfit behaviour is what is expected here.

The session creates a pod from --manifest-url for --user, waits for it, checks
every field of get_pods, the owner lookup, what another user can and cannot
see or do, the user-id rules, the manifest whitelist, HTTP-level errors, then
deletes the pod, and finally creates one more and removes it with
delete_all_user.

It prints one line per check ("PASS ..." or "FAIL ... -- got: ..."), a few
"INFO" lines, and ends with exactly one line `compat: N passed, N failed`.
The exit status is 1 if any check failed, 0 otherwise (2 for bad arguments).

Standard library only.  Example:

  python3 tests/compat/deic_session.py --url http://127.0.0.1:8080 \\
      --manifest-url https://raw.githubusercontent.com/deic-dk/pod_manifests/main/x.yaml \\
      --token-key appendURL --token-value '?token=abc' \\
      --ingress-domain pods.example.org \\
      --user alice@example.org --other-user bob@example.org \\
      --pod-cidr 10.128.0.0/15
"""

import argparse
import datetime
import email.utils
import ipaddress
import json
import os
import re
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deic_client import DeicClient, NotJSON  # noqa: E402


# --- rules from the documentation ------------------------------------------

# §1.2: every PodInfo field and its JSON type.
PODINFO_STRING_FIELDS = [
    "pod_name", "container_name", "image_name", "pod_ip", "node_ip",
    "owner", "age", "status", "url", "ssh_url",
]
PODINFO_OBJECT_FIELDS = ["tokens", "k8s_pod_info"]
PODINFO_FIELDS = PODINFO_STRING_FIELDS + PODINFO_OBJECT_FIELDS

# DNS-1123 label: what a pod name must be (and the host label in url).
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# §1.1: lowercase alphanumerics plus -._, at most one @, starts and ends with
# an alphanumeric, at least 2 characters.  Only used to sanity-check arguments.
USER_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*(@[a-z0-9._-]*)?[a-z0-9]$")
INVALID_USER_IDS = ["foO@bar", "foo@bar@baz", "foo@", ".foo", "-foo", "foo."]
VALID_USER_IDS = ["foo", "foo@bar.baz", "foo-bar.baz@foo.bar-baz"]

# §1.2: age is "H:M:S", not zero-padded.
AGE = re.compile(r"^(0|[1-9][0-9]*):(0|[1-9][0-9]?):(0|[1-9][0-9]?)$")
# §1.2: status is "<Phase>:<startTime as 2006-01-02T15:04:05Z>".
RUNNING_STATUS = re.compile(r"^Running:(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)$")

# Quick answers (no waiting) must come back within this many seconds.
QUICK = 5.0
# get_podip_owner long-polls 9 x 0.5 s when no pod has the address.
PODIP_LONG_POLL_LIMIT = 6.5


# --- output ----------------------------------------------------------------

def show(value, limit=400):
    """A short, one-line rendering of a response value."""
    if isinstance(value, NotJSON):
        text = "non-JSON body %r" % value.text
    elif isinstance(value, str):
        text = repr(value)
    else:
        try:
            text = json.dumps(value, sort_keys=True)
        except (TypeError, ValueError):
            text = repr(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit] + "...(%d chars)" % len(text)


def got(status, body):
    return "HTTP %s %s" % (status, show(body))


def same_json(a, b):
    """Equality that tells true from 1 and false from 0."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, what, ok, got_text=""):
        if ok:
            self.passed += 1
            print("PASS  %s" % what)
        else:
            self.failed += 1
            print("FAIL  %s -- got: %s" % (what, got_text))
        sys.stdout.flush()
        return ok

    def info(self, text):
        print("INFO  %s" % text)
        sys.stdout.flush()


class Skip(Exception):
    """Raised by a step when an earlier step did not give it what it needs."""


# --- the session -------------------------------------------------------------

class Session:
    def __init__(self, args):
        self.args = args
        self.client = DeicClient(args.url, timeout=args.timeout, watch_timeout=args.watch_timeout)
        self.c = Checks()
        self.user = args.user
        self.other = args.other_user
        self.cidr = ipaddress.ip_network(args.pod_cidr, strict=False)
        self.pod_name = None   # set by create_pod
        self.ready = False     # set by watch_create_pod
        self.pod_ip = None     # set by get_pods
        self.maybe_pods_left = False

    # helpers

    def need(self, *what):
        for name in what:
            if not getattr(self, name):
                raise Skip("needs %s from an earlier step" % name)

    def server_now(self):
        """The backend's clock from the Date header of the last reply, if any."""
        date = self.client.last.headers.get("date") if self.client.last else None
        if date:
            try:
                return email.utils.parsedate_to_datetime(date), True
            except (TypeError, ValueError):
                pass
        return datetime.datetime.now(datetime.timezone.utc), False

    def check_failure(self, what, status, body, field, value):
        """A documented failure: 400, the endpoint's field kept, an "error" string added."""
        ok = (status == 400 and isinstance(body, dict) and field in body
              and same_json(body[field], value)
              and isinstance(body.get("error"), str) and body["error"] != "")
        return self.c.check('%s -> 400 {"%s": %s, "error": "<message>"}'
                            % (what, field, json.dumps(value)), ok, got(status, body))

    def check_exact(self, what, status, body, want_status, want_body):
        ok = status == want_status and same_json(body, want_body)
        return self.c.check("%s -> %d %s" % (what, want_status, json.dumps(want_body)),
                            ok, got(status, body))

    def check_json_content_type(self, what):
        ctype = self.client.last.headers.get("content-type", "")
        self.c.check("%s answers with Content-Type application/json" % what,
                     ctype.split(";")[0].strip().lower() == "application/json", repr(ctype))

    def find_pod(self, pods):
        if not isinstance(pods, list):
            return None
        for info in pods:
            if isinstance(info, dict) and info.get("pod_name") == self.pod_name:
                return info
        return None

    # steps

    def step_preconditions(self):
        for who, uid in (("user", self.user), ("other user", self.other)):
            status, body = self.client.get_pods(uid)
            self.check_exact("get_pods for the %s (%s) before the session" % (who, uid),
                             status, body, 200, [])
            if uid == self.user and isinstance(body, list) and body:
                raise Skip("the user must start with no pods; use fresh user ids or "
                           "clean up with delete_all_user first")
        self.check_json_content_type("get_pods")

    def step_create(self):
        self.maybe_pods_left = True
        status, body = self.client.create_pod(self.user, self.args.manifest_url, {})
        name = body.get("pod_name") if isinstance(body, dict) else None
        self.c.check("create_pod -> 200 with a non-empty string pod_name",
                     status == 200 and isinstance(name, str) and name != "", got(status, body))
        if not (status == 200 and isinstance(name, str) and name):
            raise Skip("create_pod failed, no pod to continue with")
        self.pod_name = name
        self.c.info("pod_name = %s" % name)
        self.c.check("create_pod pod_name is a DNS-1123 label of at most 63 chars",
                     len(name) <= 63 and DNS_LABEL.match(name) is not None, repr(name))
        self.c.check("create_pod success has no \"error\" field", "error" not in body, show(body))
        if "warnings" in body:
            warnings = body["warnings"]
            self.c.check("create_pod \"warnings\" is a list of strings",
                         isinstance(warnings, list) and all(isinstance(w, str) for w in warnings),
                         show(warnings))
        self.check_json_content_type("create_pod")

    def step_while_creating(self):
        self.need("pod_name")
        status, body = self.client.get_pods(self.user)
        info = self.find_pod(body)
        self.c.check("get_pods while creating lists the new pod",
                     status == 200 and info is not None, got(status, body))
        if info is not None:
            missing = [f for f in PODINFO_FIELDS if f not in info]
            self.c.check("get_pods while creating: PodInfo has every field", not missing,
                         "missing %s in %s" % (missing, show(info)))
            self.c.check('get_pods while creating: status is "Creating"',
                         info.get("status") == "Creating", show(info.get("status")))
        # Another user's watch must answer false at once, not wait for the pod.
        status, body = self.client.watch_create_pod(self.other, self.pod_name)
        elapsed = self.client.last.elapsed
        self.check_exact("watch_create_pod by the other user while creating", status, body,
                         200, {"ready": False})
        self.c.check("watch_create_pod by the other user while creating answers at once (< %ds)"
                     % QUICK, elapsed < QUICK, "%.1f s" % elapsed)

    def step_watch_create(self):
        self.need("pod_name")
        status, body = self.client.watch_create_pod(self.user, self.pod_name)
        self.c.info("watch_create_pod took %.1f s" % self.client.last.elapsed)
        self.ready = self.check_exact("watch_create_pod by the owner", status, body,
                                      200, {"ready": True})
        if isinstance(body, dict) and "reason" in body:
            self.c.check('watch_create_pod "reason" is a string',
                         isinstance(body["reason"], str), show(body["reason"]))

    def step_podinfo(self):
        self.need("pod_name", "ready")
        status, body = self.client.get_pods(self.user)
        server_now, from_server = self.server_now()
        ok = (status == 200 and isinstance(body, list) and len(body) == 1
              and isinstance(body[0], dict))
        self.c.check("get_pods for the user -> 200 with a list of exactly one PodInfo object",
                     ok, got(status, body))
        if not ok:
            raise Skip("no PodInfo to check")
        self.check_json_content_type("get_pods")
        self.check_podinfo(body[0], server_now, from_server)

    def check_podinfo(self, info, server_now, from_server):
        c = self.c
        domain = self.args.ingress_domain
        missing = [f for f in PODINFO_FIELDS if f not in info]
        c.check("PodInfo has every field of §1.2 (%s)" % ", ".join(PODINFO_FIELDS),
                not missing, "missing %s in %s" % (missing, show(info)))
        for field in PODINFO_STRING_FIELDS:
            c.check("PodInfo.%s is a string" % field, isinstance(info.get(field), str),
                    show(info.get(field)))
        for field in PODINFO_OBJECT_FIELDS:
            c.check("PodInfo.%s is an object" % field, isinstance(info.get(field), dict),
                    show(info.get(field)))
        extra = sorted(set(info) - set(PODINFO_FIELDS))
        if extra:
            c.info("PodInfo has extra fields: %s" % ", ".join(extra))

        c.check("PodInfo.pod_name equals the created pod name",
                info.get("pod_name") == self.pod_name, show(info.get("pod_name")))
        for field in ("container_name", "image_name"):
            value = info.get(field)
            c.check("PodInfo.%s is non-empty" % field, isinstance(value, str) and value != "",
                    show(value))

        pod_ip = info.get("pod_ip")
        try:
            address = ipaddress.ip_address(pod_ip)
        except (TypeError, ValueError):
            address = None
        c.check("PodInfo.pod_ip is an IP address inside %s" % self.cidr,
                address is not None and address in self.cidr, show(pod_ip))
        if address is not None:
            self.pod_ip = str(address)
        node_ip = info.get("node_ip")
        try:
            ipaddress.ip_address(node_ip)
            node_ok = True
        except (TypeError, ValueError):
            node_ok = False
        c.check("PodInfo.node_ip is an IP address", node_ok, show(node_ip))

        c.check("PodInfo.owner is exactly the user id %r" % self.user,
                info.get("owner") == self.user, show(info.get("owner")))

        # status "Running:2006-01-02T15:04:05Z" and age "H:M:S" from the same start time.
        status_text = info.get("status")
        match = RUNNING_STATUS.match(status_text) if isinstance(status_text, str) else None
        start = None
        if match:
            try:
                start = datetime.datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%SZ")
                start = start.replace(tzinfo=datetime.timezone.utc)
            except ValueError:
                start = None
        c.check('PodInfo.status is "Running:" + a 2006-01-02T15:04:05Z timestamp',
                start is not None, show(status_text))
        age_text = info.get("age")
        age_match = AGE.match(age_text) if isinstance(age_text, str) else None
        c.check('PodInfo.age is "H:M:S", not zero-padded, M and S below 60',
                age_match is not None, show(age_text))
        if start is not None and age_match:
            h, m, s = (int(x) for x in age_match.groups())
            age = h * 3600 + m * 60 + s
            expected = (server_now - start).total_seconds()
            slack = 10 if from_server else 120
            c.check("PodInfo.age matches the start time in status (within %d s of %s clock)"
                    % (slack, "the backend's" if from_server else "the local"),
                    abs(age - expected) <= slack,
                    "age %s = %d s, but %s - %s = %d s"
                    % (age_text, age, server_now.isoformat(), start.isoformat(), expected))

        want_url = "https://%s.%s" % (self.pod_name, domain)
        c.check("PodInfo.url is %r" % want_url, info.get("url") == want_url, show(info.get("url")))

        ssh_url = info.get("ssh_url")
        ssh_re = re.compile(r"^ssh://root@%s:([0-9]+)$" % re.escape(domain))
        ssh_match = ssh_re.match(ssh_url) if isinstance(ssh_url, str) else None
        ssh_port = ssh_match.group(1) if ssh_match else None
        c.check("PodInfo.ssh_url is 'ssh://root@%s:<port>' with a port in 1..65535" % domain,
                ssh_port is not None and 1 <= int(ssh_port) <= 65535, show(ssh_url))

        tokens = info.get("tokens")
        key, value = self.args.token_key, self.args.token_value
        c.check("PodInfo.tokens[%r] is the string %r" % (key, value),
                isinstance(tokens, dict) and tokens.get(key) == value, show(tokens))
        if isinstance(tokens, dict):
            c.check("PodInfo.tokens values are all strings",
                    all(isinstance(v, str) for v in tokens.values()), show(tokens))

        pod_info = info.get("k8s_pod_info")
        port = pod_info.get("sshPort") if isinstance(pod_info, dict) else None
        c.check("PodInfo.k8s_pod_info.sshPort is a string equal to the ssh_url port (%s)"
                % ssh_port, isinstance(port, str) and port == ssh_port, show(pod_info))

        # What the PHP frontend does with it: url + "/" + tokens.appendURL.
        url = info.get("url")
        token = tokens.get(key) if isinstance(tokens, dict) else None
        c.check("frontend-style link url + \"/\" + tokens[%r] can be built (both strings)" % key,
                isinstance(url, str) and isinstance(token, str), "url %s, token %s"
                % (show(url), show(token)))
        if isinstance(url, str) and isinstance(token, str):
            c.info("frontend link: %s" % (url + "/" + token))

    def step_owner_lookup(self):
        self.need("pod_ip")
        status, text = self.client.get_podip_owner(self.pod_ip)
        self.c.check("get_podip_owner?ip=%s -> 200 with text body exactly %r"
                     % (self.pod_ip, self.user),
                     status == 200 and text == self.user, got(status, text))

    def step_other_user(self):
        self.need("pod_name", "ready")
        other, pod = self.other, self.pod_name
        nobody_pod = "compat-no-such-pod-" + uuid.uuid4().hex[:8]

        status, body = self.client.get_pods(other)
        self.check_exact("get_pods for the other user", status, body, 200, [])

        status, body = self.client.watch_create_pod(other, pod)
        self.check_exact("watch_create_pod by the other user on the user's pod",
                         status, body, 200, {"ready": False})
        self.c.check('... and no "reason" key (nothing leaks)',
                     not (isinstance(body, dict) and "reason" in body), show(body))
        status2, body2 = self.client.watch_create_pod(other, nobody_pod)
        self.c.check("... and the same answer as for a pod that does not exist",
                     status == status2 and same_json(body, body2),
                     "%s vs %s" % (got(status, body), got(status2, body2)))

        status, body = self.client.watch_delete_pod(other, pod)
        self.check_exact("watch_delete_pod by the other user on the user's pod",
                         status, body, 200, {"deleted": True})
        status2, body2 = self.client.watch_delete_pod(other, nobody_pod)
        self.c.check("... and the same answer as for a pod that does not exist",
                     status == status2 and same_json(body, body2),
                     "%s vs %s" % (got(status, body), got(status2, body2)))

        status, body = self.client.delete_pod(other, pod)
        self.check_failure("delete_pod by the other user on the user's pod", status, body,
                           "requested", False)

        status, body = self.client.delete_all_user(other)
        self.check_exact("delete_all_user for the other user (who has nothing)",
                         status, body, 200, {"deleted": True})

        status, body = self.client.get_pods(self.user)
        info = self.find_pod(body)
        self.c.check("the user's pod is still listed for its owner afterwards, still Running",
                     status == 200 and info is not None
                     and str(info.get("status", "")).startswith("Running:"), got(status, body))

    def step_user_ids(self):
        for uid in INVALID_USER_IDS:
            status, body = self.client.get_pods(uid)
            self.c.check("get_pods with invalid user id %r -> 400 with an \"error\" string" % uid,
                         status == 400 and isinstance(body, dict)
                         and isinstance(body.get("error"), str) and body["error"] != "",
                         got(status, body))
        for uid in VALID_USER_IDS:
            status, body = self.client.get_pods(uid)
            self.check_exact("get_pods with valid user id %r" % uid, status, body, 200, [])
        bad = INVALID_USER_IDS[0]
        status, body = self.client.create_pod(bad, self.args.manifest_url, {})
        self.check_failure("create_pod with invalid user id %r" % bad, status, body,
                           "pod_name", "")
        status, body = self.client.delete_pod(bad, self.pod_name or "compat-x")
        self.check_failure("delete_pod with invalid user id %r" % bad, status, body,
                           "requested", False)
        status, body = self.client.delete_all_user(bad)
        self.check_failure("delete_all_user with invalid user id %r" % bad, status, body,
                           "deleted", False)

    def step_whitelist(self):
        for url in ("http://evil.example/?" + self.args.manifest_url,
                    "http://evil.example/pod.yaml"):
            status, body = self.client.create_pod(self.user, url, {})
            self.check_failure("create_pod with non-whitelisted yaml_url %r" % url,
                               status, body, "pod_name", "")
            if isinstance(body, dict) and isinstance(body.get("error"), str):
                self.c.info("error was: %s" % body["error"])

    def step_http_rules(self):
        cl = self.client
        for method, path, want in (("GET", "/create_pod", 405),
                                   ("GET", "/get_pods", 405),
                                   ("POST", "/get_podip_owner", 405),
                                   ("POST", "/nope", 404)):
            data = b"{}" if method == "POST" else None
            headers = {"Content-Type": "application/json"} if method == "POST" else {}
            reply = cl.request(method, path, data=data, headers=headers)
            self.c.check("%s %s -> %d" % (method, path, want), reply.status == want,
                         got(reply.status, reply.text))

        bad_json = b'{"user_id": "foo", '
        reply = cl.request("POST", "/get_pods", data=bad_json,
                           headers={"Content-Type": "application/json"})
        body = reply.json()
        self.c.check("malformed JSON to get_pods -> 400 with an \"error\" string",
                     reply.status == 400 and isinstance(body, dict)
                     and isinstance(body.get("error"), str) and body["error"] != "",
                     got(reply.status, body))
        reply = cl.request("POST", "/create_pod", data=bad_json,
                           headers={"Content-Type": "application/json"})
        self.check_failure("malformed JSON to create_pod", reply.status, reply.json(),
                           "pod_name", "")

        outside = next(ip for ip in ("192.0.2.1", "198.51.100.1", "203.0.113.1", "10.0.0.1")
                       if ipaddress.ip_address(ip) not in self.cidr)
        for label, ip in (("without ip", None), ("with ip=not-an-ip", "not-an-ip"),
                          ("with ip=%s (outside %s)" % (outside, self.cidr), outside)):
            status, text = cl.get_podip_owner(ip)
            self.c.check("get_podip_owner %s -> 400 with a non-empty text message" % label,
                         status == 400 and text.strip() != "", got(status, text))

    def step_delete(self):
        self.need("pod_name")
        user, pod = self.user, self.pod_name
        status, body = self.client.delete_pod(user, pod)
        self.check_exact("delete_pod by the owner", status, body, 200, {"requested": True})

        status, body = self.client.delete_pod(user, pod)
        self.check_failure("second delete_pod of the same pod", status, body,
                           "requested", False)

        status, body = self.client.get_pods(user)
        info = self.find_pod(body)
        if status == 200 and info is not None:
            self.c.check('get_pods while deleting: status is "Deleting"',
                         info.get("status") == "Deleting", show(info.get("status")))
        else:
            self.c.info("pod already gone from get_pods (%s); "
                        "\"Deleting\" status not checked" % got(status, body))

        status, body = self.client.watch_delete_pod(self.other, pod)
        elapsed = self.client.last.elapsed
        self.check_exact("watch_delete_pod by the other user while deleting",
                         status, body, 200, {"deleted": True})
        self.c.check("watch_delete_pod by the other user answers at once (< %ds)" % QUICK,
                     elapsed < QUICK, "%.1f s" % elapsed)

        status, body = self.client.watch_delete_pod(user, pod)
        self.c.info("watch_delete_pod took %.1f s" % self.client.last.elapsed)
        self.check_exact("watch_delete_pod by the owner", status, body, 200, {"deleted": True})

        status, body = self.client.get_pods(user)
        if self.check_exact("get_pods after the delete", status, body, 200, []):
            self.maybe_pods_left = False

        if self.pod_ip:
            status, text = self.client.get_podip_owner(self.pod_ip, timeout=PODIP_LONG_POLL_LIMIT + 5)
            elapsed = self.client.last.elapsed
            self.c.check("get_podip_owner?ip=<old pod ip %s> -> 200 with an empty body"
                         % self.pod_ip, status == 200 and text == "", got(status, text))
            self.c.check("... answered within %.1f s" % PODIP_LONG_POLL_LIMIT,
                         elapsed <= PODIP_LONG_POLL_LIMIT, "%.1f s" % elapsed)

    def step_delete_all_user(self):
        self.maybe_pods_left = True
        status, body = self.client.create_pod(self.user, self.args.manifest_url, {})
        name = body.get("pod_name") if isinstance(body, dict) else None
        ok = status == 200 and isinstance(name, str) and name != ""
        self.c.check("create_pod again -> 200 with a pod_name", ok, got(status, body))
        if ok:
            status, body = self.client.watch_create_pod(self.user, name)
            self.check_exact("watch_create_pod for the second pod", status, body,
                             200, {"ready": True})
        status, body = self.client.delete_all_user(self.user)
        self.check_exact("delete_all_user for the user", status, body, 200, {"deleted": True})
        status, body = self.client.get_pods(self.user)
        if self.check_exact("get_pods after delete_all_user", status, body, 200, []):
            self.maybe_pods_left = False

    # running

    def run(self):
        steps = [
            ("preconditions", self.step_preconditions, True),
            ("create_pod", self.step_create, False),
            ("while creating", self.step_while_creating, False),
            ("watch_create_pod", self.step_watch_create, False),
            ("get_pods PodInfo", self.step_podinfo, False),
            ("get_podip_owner", self.step_owner_lookup, False),
            ("other user", self.step_other_user, False),
            ("user ids", self.step_user_ids, False),
            ("manifest whitelist", self.step_whitelist, False),
            ("HTTP rules", self.step_http_rules, False),
            ("delete", self.step_delete, False),
            ("delete_all_user", self.step_delete_all_user, False),
        ]
        try:
            for label, step, fatal in steps:
                print("----  %s" % label)
                try:
                    step()
                except Skip as why:
                    self.c.check("%s: step completed" % label, False, "skipped, %s" % why)
                    if fatal:
                        break
                except Exception as exc:  # transport errors, timeouts
                    self.c.check("%s: step ran without a transport error" % label, False,
                                 "%s: %s" % (type(exc).__name__, exc))
                    if fatal:
                        break
        finally:
            self.cleanup()
        print("compat: %d passed, %d failed" % (self.c.passed, self.c.failed))
        return 1 if self.c.failed else 0

    def cleanup(self):
        """Best effort: do not leave the user's pods behind after a failed session."""
        if not self.maybe_pods_left or self.args.no_cleanup:
            return
        try:
            status, body = self.client.delete_all_user(self.user)
            self.c.info("cleanup: delete_all_user(%s) -> %s" % (self.user, got(status, body)))
        except Exception as exc:
            self.c.info("cleanup: delete_all_user(%s) failed: %s" % (self.user, exc))


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Run a full user_pods API session against a backend and check it "
                    "(written from deic-dk's documentation, not outfit's code).")
    p.add_argument("--url", required=True, help="backend base URL, e.g. http://127.0.0.1:8080")
    p.add_argument("--manifest-url", required=True,
                   help="whitelisted Pod manifest URL (ingress-port annotation, containerPort 22, "
                        "copy-token annotation with one key, a 'sciencedata' volumeMount)")
    p.add_argument("--token-key", required=True, help="the key named by sciencedata.dk/copy-token")
    p.add_argument("--token-value", required=True, help="the value that token must have")
    p.add_argument("--ingress-domain", required=True, help="the backend's ingress domain")
    p.add_argument("--user", required=True, help="user id that owns the pods (must have no pods)")
    p.add_argument("--other-user", required=True, help="a second, different user id")
    p.add_argument("--pod-cidr", required=True, help="the cluster's pod CIDR, e.g. 10.128.0.0/15")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds for quick calls (default 30)")
    p.add_argument("--watch-timeout", type=float, default=180.0,
                   help="seconds for watch_* and delete_all_user (default 180)")
    p.add_argument("--no-cleanup", action="store_true",
                   help="do not call delete_all_user for --user when the session stops early")
    args = p.parse_args(argv)
    for opt, uid in (("--user", args.user), ("--other-user", args.other_user)):
        if not USER_ID.match(uid):
            p.error("%s %r is not a valid user id (§1.1)" % (opt, uid))
    if args.user == args.other_user:
        p.error("--user and --other-user must differ")
    try:
        ipaddress.ip_network(args.pod_cidr, strict=False)
    except ValueError as exc:
        p.error("--pod-cidr: %s" % exc)
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return Session(args).run()


if __name__ == "__main__":
    sys.exit(main())
