// The API client: what it sends, and the message of each kind of failure.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiError, apiClient } from "../api.js";

// A client whose fetch answers `answer` (a Response, or an Error to throw) and records calls.
function client(answer, { token = "t0k", generation } = {}) {
  const seen = { calls: [], ended: [] };
  let gen = 1;
  const api = apiClient({
    fetch: async (url, init) => {
      seen.calls.push({ url, init });
      if (generation) gen = generation;
      if (answer instanceof Error) throw answer;
      return answer;
    },
    base: "api/v1/",
    token: () => token,
    generation: () => gen,
    sessionEnded: (err) => seen.ended.push(err.message),
  });
  return { api, seen };
}

async function failure(promise) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof ApiError, `not an ApiError: ${e}`);
    return { status: e.status, reason: e.reason, message: e.message, signIn: e.signIn };
  }
  assert.fail("the call did not fail");
}

const json = (body, status, statusText) =>
  new Response(JSON.stringify(body), { status, statusText, headers: { "content-type": "application/json" } });

test("an API error's message is its `error`, with its reason", async () => {
  const body = { error: "maxCpuPerUser is 1: your 1 running workspaces request 1 and this one 1 (2 in all)", reason: "LimitExceeded" };
  const { api } = client(json(body, 403, "Forbidden"));
  assert.deepEqual(await failure(api.call("POST", "workspaces", { manifest: "web" })), {
    status: 403, reason: "LimitExceeded", message: body.error, signIn: null,
  });
});

test("an answer that is not the API's says its status and the start of its text", async () => {
  const html = "<html>" + "x".repeat(300);
  let { api } = client(new Response(html, { status: 502, statusText: "Bad Gateway" }));
  const got = await failure(api.call("GET", "me"));
  assert.equal(got.message, "502 Bad Gateway: " + html.slice(0, 200));
  ({ api } = client(new Response("", { status: 500 })));
  assert.equal((await failure(api.call("GET", "me"))).message, "500 error");
  ({ api } = client(json({ reason: "NotFound" }, 404, "Not Found")));
  assert.deepEqual(await failure(api.call("GET", "me")), { status: 404, reason: "NotFound", message: "404 Not Found", signIn: null });
});

test("a server out of reach, and an answer that is not JSON, are said so", async () => {
  let { api } = client(new TypeError("Failed to fetch"));
  assert.deepEqual(await failure(api.call("GET", "me")), {
    status: 0, reason: "", message: "The server could not be reached (Failed to fetch).", signIn: null,
  });
  ({ api } = client(new Response("<html>", { status: 200 })));
  assert.equal((await failure(api.call("GET", "me"))).message, "The server sent an answer that is not JSON.");
});

test("a 401 ends the session, unless asked quietly or the session changed meanwhile", async () => {
  const refusal = { error: "the token was not accepted: invalid bearer token", reason: "Unauthenticated", signIn: "/auth/login" };
  let { api, seen } = client(json(refusal, 401));
  assert.equal((await failure(api.call("GET", "workspaces"))).signIn, "/auth/login");
  assert.deepEqual(seen.ended, [refusal.error]);
  ({ api, seen } = client(json(refusal, 401)));
  await failure(api.call("GET", "me", undefined, { quiet401: true }));
  assert.deepEqual(seen.ended, []);
  ({ api, seen } = client(json(refusal, 401), { generation: 2 }));
  await failure(api.call("GET", "workspaces"));
  assert.deepEqual(seen.ended, []);
});

test("a sign-in link elsewhere than this site is dropped", async () => {
  const { api } = client(json({ error: "no", signIn: "https://elsewhere.example/login" }, 401));
  assert.equal((await failure(api.call("GET", "me", undefined, { quiet401: true }))).signIn, null);
});

test("a call sends the token, and JSON only with a body", async () => {
  let { api, seen } = client(json({ name: "web-alice" }, 201));
  assert.deepEqual(await api.call("POST", "workspaces", { manifest: "web" }), { name: "web-alice" });
  const [post] = seen.calls;
  assert.equal(post.url, "api/v1/workspaces");
  assert.deepEqual(post.init.headers, { Accept: "application/json", Authorization: "Bearer t0k", "Content-Type": "application/json" });
  assert.equal(post.init.body, '{"manifest":"web"}');
  ({ api, seen } = client(new Response(null, { status: 204 })));
  assert.equal(await api.call("GET", "me", undefined, { token: null }), null);
  assert.deepEqual(seen.calls[0].init.headers, { Accept: "application/json" });
  assert.equal(seen.calls[0].init.body, undefined);
});

test("a stream asks for events, with the last event's id when there was one", async () => {
  const { api, seen } = client(new Response("", { status: 200 }));
  const signal = new AbortController().signal;
  await api.stream("workspaces/w/progress", signal, "");
  await api.stream("workspaces/w/progress", signal, "7");
  assert.deepEqual(seen.calls.map((c) => c.init.headers), [
    { Accept: "text/event-stream", Authorization: "Bearer t0k" },
    { Accept: "text/event-stream", Authorization: "Bearer t0k", "Last-Event-ID": "7" },
  ]);
  assert.equal(seen.calls[0].init.signal, signal);
});
