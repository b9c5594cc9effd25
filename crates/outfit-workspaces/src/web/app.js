// The page `outfit workspaces` serves at `/`: sign in, launch workspaces from the catalogue,
// follow their progress live, list, stop, start and delete them. Talks only to /api/v1/ (see
// the API's openapi.json). ES modules served as they are, no build step, no external resources.
// Every piece of data is put into the page with textContent, never as HTML.
//
// This module signs in and out and wires the rest: launch.js (the form), list.js and table.js
// (the list), progress.js and cards.js (live progress); the pure api.js, sse.js, rows.js and
// format.js are unit-tested with node (test/).
import { $, setText, show, showError } from "./dom.js";
import { formError, formWarnings, launch, loadCatalogue, renderEntry } from "./launch.js";
import { refresh } from "./list.js";
import { stopFollowing, whenStreamEnds } from "./progress.js";
import { api, session, whenSessionEnds } from "./session.js";
import { gone, page, revealed, rows } from "./state.js";

const TOKEN_KEY = "outfit.token";
const REFRESH_MS = 5000;
let timer = null;

function banner(message) {
  showError("banner", message);
}

// Finds who we are: the saved token first, then without one (an authenticating proxy may vouch
// for us); else the sign-in form, or a retry while the service is away.
function boot() {
  const gen = session.generation;
  show($("loading"), true);
  show($("signin"), false);
  show($("app"), false);
  let stored = null;
  try { stored = sessionStorage.getItem(TOKEN_KEY); } catch (_) { stored = null; }
  const first = stored
    ? api.call("GET", "me", undefined, { token: stored, quiet401: true }).then(
        (me) => ({ me, token: stored }),
        (e) => {
          if (e.status !== 401) throw e;
          forgetToken();
          return null;
        }
      )
    : Promise.resolve(null);
  first
    .then((found) => found || api.call("GET", "me", undefined, { token: null, quiet401: true }).then((me) => ({ me, token: null })))
    .then(
      (found) => {
        if (gen !== session.generation) return;
        banner("");
        session.token = found.token;
        signedIn(found.me);
      },
      (e) => {
        if (gen !== session.generation) return;
        show($("loading"), false);
        if (e.status === 401) {
          banner("");
          offerProvider(e.signIn);
          showSignin(stored ? "Your saved token is no longer accepted. Sign in again." : "");
        } else {
          banner("The workspace service is not available: " + e.message + " Retrying…");
          setTimeout(() => { if (gen === session.generation) boot(); }, 5000);
        }
      }
    );
}

// The site's sign-in, when the backend has one: back to this very page once signed in.
function offerProvider(signIn) {
  if (signIn) {
    $("signin-provider-link").href = signIn + "?to=" + encodeURIComponent(location.pathname + location.search);
  }
  show($("signin-provider"), !!signIn);
}

function forgetToken() {
  session.token = null;
  try { sessionStorage.removeItem(TOKEN_KEY); } catch (_) { /* private mode */ }
}

function showSignin(message) {
  show($("loading"), false);
  show($("app"), false);
  show($("account"), false);
  show($("signin"), true);
  showError("signin-error", message);
  $("signin-token").focus();
}

function signinSubmit(ev) {
  ev.preventDefault();
  const token = $("signin-token").value.trim().replace(/^bearer\s+/i, "");
  if (!token) {
    showError("signin-error", "Paste a token first.");
    return;
  }
  const button = $("signin-submit");
  button.disabled = true;
  setText(button, "Signing in…");
  show($("signin-error"), false);
  api.call("GET", "me", undefined, { token, quiet401: true })
    .then(
      (me) => {
        try { sessionStorage.setItem(TOKEN_KEY, token); } catch (_) { /* kept in memory only */ }
        session.token = token;
        $("signin-token").value = "";
        signedIn(me);
      },
      (e) => showError("signin-error", e.status === 401 ? "The cluster did not accept this token: " + e.message : e.message)
    )
    .then(() => {
      button.disabled = false;
      setText(button, "Sign in");
    });
}

function signedIn(me) {
  session.me = me || {};
  show($("loading"), false);
  show($("signin"), false);
  show($("app"), true);
  show($("account"), true);
  setText($("whoami"), session.me.user || session.me.username || "unknown");
  const about = [];
  if (session.me.username && session.me.username !== session.me.user) about.push("Authenticated as " + session.me.username);
  if (session.me.groups && session.me.groups.length) about.push("Groups: " + session.me.groups.join(", "));
  $("whoami").title = about.join("\n");
  show($("admin-badge"), !!session.me.admin);
  show($("signout"), !!session.token || session.me.via === "session");
  show($("all-toggle"), !!session.me.admin);
  loadCatalogue();
  refresh();
  clearInterval(timer);
  timer = setInterval(() => { if (!document.hidden) refresh(); }, REFRESH_MS);
}

// Ends the session's work: late answers are dropped, streams stopped, rows and cards gone.
function stopAll() {
  session.generation++;
  clearInterval(timer);
  timer = null;
  stopFollowing();
  rows.forEach((rec) => rec.tr.remove());
  rows.clear();
  gone.clear();
  revealed.clear();
  session.me = null;
}

function sessionEnded(err) {
  const hadToken = !!session.token;
  stopAll();
  forgetToken();
  if (hadToken) showSignin("Your session ended (" + err.message + "). Sign in again.");
  else boot();
}

function signOut(ev) {
  ev.preventDefault();
  const cookie = session.me && session.me.via === "session";
  stopAll();
  forgetToken();
  if (!cookie) {
    boot();
    return;
  }
  // The session's cookie is HttpOnly: only the backend can remove it.
  fetch("/auth/logout", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: "{}",
    credentials: "same-origin",
  }).then(boot, boot);
}

function init() {
  whenSessionEnds(sessionEnded);
  $("launch-form").dataset.launchSeq = "0";
  $("launch-form").dataset.busy = "false";
  $("signin-form").addEventListener("submit", signinSubmit);
  $("signin-token").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      if ($("signin-form").requestSubmit) $("signin-form").requestSubmit();
      else signinSubmit(ev);
    }
  });
  $("signout").addEventListener("click", signOut);
  $("launch-form").addEventListener("submit", launch);
  $("catalogue-select").addEventListener("change", () => {
    formError("");
    formWarnings(null);
    renderEntry();
  });
  $("refresh").addEventListener("click", () => refresh());
  $("show-all").addEventListener("change", (ev) => {
    page.showAll = ev.target.checked;
    setText($("list-title"), page.showAll ? "All workspaces" : "My workspaces");
    refresh();
  });
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refresh(); });
  whenStreamEnds(refresh);
  boot();
}

// A module runs after the document is parsed (deferred), but be safe when it is not.
if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
else init();
