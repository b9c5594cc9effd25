// The native API's client: requests with the session's token, and every failure turned into an
// ApiError whose message a person can read (the API's own `error` when it sent one). Pure: the
// `fetch` it uses is passed in, so node's tests give it a fake.

export class ApiError extends Error {
  constructor(status, reason, message, signIn) {
    super(message);
    this.status = status; // 0 when the server could not be reached
    this.reason = reason || "";
    this.signIn = signIn || null; // where to sign in with the site's provider, when it has one
  }
}

// The ApiError of a failed answer: the API's `{"error", "reason"}` when the body is that, else
// the HTTP status and the start of whatever came (a proxy's HTML page, say).
export function errorFrom(res, text) {
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch (_) {
    body = null;
  }
  const message = body && typeof body.error === "string" && body.error
    ? body.error
    : res.status + " " + (res.statusText || "error") + (text && !body ? ": " + text.slice(0, 200) : "");
  const signIn = body && typeof body.signIn === "string" && body.signIn.charAt(0) === "/" ? body.signIn : null;
  return new ApiError(res.status, body && body.reason, message, signIn);
}

// headers with `Authorization: Bearer token` when there is a token.
function withToken(headers, token) {
  const all = Object.assign({}, headers);
  if (token) all.Authorization = "Bearer " + token;
  return all;
}

// A client of the API at `base`. token() is the session's token (null when an authenticating
// proxy vouches for us); generation() changes when the session does, so that a 401 answering a
// request of an old session doesn't end the new one; sessionEnded(err) is told of any other 401.
export function apiClient({ fetch, base, token, generation, sessionEnded }) {
  // opts.token: use this token instead of the session's (null: none); opts.quiet401: a 401 is
  // an answer, not the end of the session (signing in asks with a token it is not sure of).
  async function call(method, path, body, opts = {}) {
    const gen = generation();
    const headers = withToken({ Accept: "application/json" }, opts.token === undefined ? token() : opts.token);
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let res;
    try {
      res = await fetch(base + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
        credentials: "same-origin",
      });
    } catch (e) {
      throw new ApiError(0, "", "The server could not be reached (" + (e && e.message ? e.message : e) + ").");
    }
    const text = await res.text();
    if (!res.ok) {
      const err = errorFrom(res, text);
      if (res.status === 401 && !opts.quiet401 && gen === generation()) sessionEnded(err);
      throw err;
    }
    if (!text) return null;
    try {
      return JSON.parse(text);
    } catch (_) {
      throw new ApiError(res.status, "", "The server sent an answer that is not JSON.");
    }
  }

  // The answer to a GET of an event stream, as it comes: the caller reads its body. The API's
  // events have no id today; one seen before is sent back, as EventSource would.
  function stream(path, signal, lastEventId) {
    const headers = withToken({ Accept: "text/event-stream" }, token());
    if (lastEventId) headers["Last-Event-ID"] = lastEventId;
    return fetch(base + path, {
      headers,
      cache: "no-store",
      credentials: "same-origin",
      signal,
    });
  }

  return { call, stream };
}
