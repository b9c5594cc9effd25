// Who is signed in, and the API client that asks as them.
import { apiClient } from "./api.js";

export const session = {
  token: null, // bearer token in use; null when an authenticating proxy vouches for us
  me: null, // the API's /me, once signed in
  generation: 0, // bumped on sign-out: late answers of the old session are dropped
};

let ended = () => {};

// fn(err) runs when the API answers 401 to the session: its token is no longer good.
export function whenSessionEnds(fn) {
  ended = fn;
}

// The session is over: the API answered 401 to it.
export function endSession(err) {
  ended(err);
}

export const api = apiClient({
  // window's fetch, looked up when called: an unbound fetch of another object throws.
  fetch: (url, init) => fetch(url, init),
  base: "api/v1/", // relative, so the page also works behind a proxy that adds a path prefix
  token: () => session.token,
  generation: () => session.generation,
  sessionEnded: (err) => endSession(err),
});

// The user is active in workspace `name` (they opened it from the page); best effort.
export function touch(name) {
  api.call("POST", "workspaces/" + encodeURIComponent(name) + "/activity", {}).catch(() => {});
}
