"""Minimal client for the deic-dk "user_pods" workspace backend API.

This is an independent compatibility client. It was written from the API's
documentation only -- deic-dk/kubernetes_backend's README (seed 004) and the
reference notes in workspaces.md §1.1-1.3 and §1.10 -- and NOT from outfit's
code.

It mirrors what deic-dk/user_pods' PHP `curlBackend()` does: every call is a
POST of a JSON document with `Content-Type: application/json` to
`http://HOST:PORT/<fn>`; the one exception is `GET /get_podip_owner?ip=...`,
which answers with a plain-text body.

Unlike curlBackend (which returns the decoded body on 200 and `false`
otherwise), every method here returns `(status, body)` so that callers can
check both.  For the JSON endpoints `body` is the decoded JSON value, or a
`NotJSON` object holding the raw text when the body is not valid JSON.
`get_podip_owner` returns `(status, text)`.  Details of the last exchange
(raw text, headers, elapsed time) are kept in `client.last`.

Standard library only.
"""

import http.client
import json
import time
import urllib.parse


class NotJSON:
    """A response body that could not be decoded as JSON."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return "NotJSON(%r)" % self.text

    def __eq__(self, other):
        return isinstance(other, NotJSON) and other.text == self.text


class Reply:
    """Everything about one HTTP exchange."""

    def __init__(self, status, text, headers, elapsed):
        self.status = status
        self.text = text
        self.headers = headers  # dict with lower-cased header names
        self.elapsed = elapsed  # seconds

    def json(self):
        try:
            return json.loads(self.text)
        except ValueError:
            return NotJSON(self.text)


class DeicClient:
    """Talks to a user_pods backend at `base_url` (e.g. http://127.0.0.1:8080)."""

    def __init__(self, base_url, timeout=30.0, watch_timeout=180.0):
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError("base_url must look like http://HOST:PORT, got %r" % base_url)
        self.scheme = url.scheme
        self.host = url.hostname
        self.port = url.port
        self.prefix = url.path.rstrip("/")
        self.timeout = timeout              # quick calls
        self.watch_timeout = watch_timeout  # calls that block (watch_*, delete_all_user)
        self.last = None

    # -- transport -------------------------------------------------------

    def request(self, method, path, data=None, headers=None, timeout=None):
        """Send one request and return a Reply. Network errors propagate."""
        if self.scheme == "https":
            conn_class = http.client.HTTPSConnection
        else:
            conn_class = http.client.HTTPConnection
        conn = conn_class(self.host, self.port, timeout=timeout or self.timeout)
        started = time.monotonic()
        try:
            conn.request(method, self.prefix + path, body=data, headers=headers or {})
            resp = conn.getresponse()
            raw = resp.read()
            reply = Reply(
                status=resp.status,
                text=raw.decode("utf-8", errors="replace"),
                headers={k.lower(): v for k, v in resp.getheaders()},
                elapsed=time.monotonic() - started,
            )
        finally:
            conn.close()
        self.last = reply
        return reply

    def post_json(self, fn, payload, timeout=None):
        """What curlBackend() does: POST json_encode(payload) to /<fn>."""
        data = json.dumps(payload).encode("utf-8")
        reply = self.request(
            "POST", "/" + fn, data=data,
            headers={"Content-Type": "application/json"}, timeout=timeout,
        )
        return reply.status, reply.json()

    # -- the API ---------------------------------------------------------

    def get_pods(self, user_id):
        return self.post_json("get_pods", {"user_id": user_id})

    def create_pod(self, user_id, yaml_url, settings=None):
        payload = {"yaml_url": yaml_url, "user_id": user_id, "settings": settings or {}}
        return self.post_json("create_pod", payload)

    def watch_create_pod(self, user_id, pod_name):
        return self.post_json("watch_create_pod", {"user_id": user_id, "pod_name": pod_name},
                              timeout=self.watch_timeout)

    def delete_pod(self, user_id, pod_name):
        return self.post_json("delete_pod", {"user_id": user_id, "pod_name": pod_name})

    def watch_delete_pod(self, user_id, pod_name):
        return self.post_json("watch_delete_pod", {"user_id": user_id, "pod_name": pod_name},
                              timeout=self.watch_timeout)

    def delete_all_user(self, user_id):
        return self.post_json("delete_all_user", {"user_id": user_id},
                              timeout=self.watch_timeout)

    def get_podip_owner(self, ip=None, timeout=None):
        """GET /get_podip_owner?ip=... ; returns (status, text body).

        With ip=None the query parameter is left out entirely.
        """
        path = "/get_podip_owner"
        if ip is not None:
            path += "?" + urllib.parse.urlencode({"ip": ip})
        reply = self.request("GET", path, timeout=timeout)
        return reply.status, reply.text
