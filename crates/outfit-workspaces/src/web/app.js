// The page `outfit workspaces` serves at `/`: sign in, launch workspaces from the catalogue,
// follow their progress live, list and delete them. Talks only to /api/v1/ (see the API's
// openapi.json). Plain script, no build step, no external resources. Every piece of data is put
// into the page with textContent, never as HTML.
(function () {
  "use strict";

  var API = "api/v1/"; // relative, so the page also works behind a proxy that adds a path prefix
  var TOKEN_KEY = "outfit.token";
  var REFRESH_MS = 5000;
  var MAX_CARDS = 6;
  var FINAL = { ready: true, failed: true, deleted: true };
  var STEP_ORDER = {
    create: ["storage", "scheduling", "image pull", "containers", "readiness", "services"],
    delete: ["stopping", "gone"],
  };

  var state = {
    token: null, // bearer token in use; null when an authenticating proxy vouches for us
    me: null,
    catalogue: [],
    clusters: [], // {name, reachable, error}: where a launch may go, the default first
    rows: new Map(), // name -> row record
    streams: new Map(), // name -> live progress stream
    cards: new Map(), // name -> progress card
    ended: new Map(), // name -> {status, at}: how its last stream ended
    gone: new Set(), // deleted, hidden until the list stops showing them
    revealed: new Set(), // "name/container" of tokens shown in clear
    timer: null,
    refreshSeq: 0,
    launchSeq: 0,
    showAll: false,
    generation: 0, // bumped on sign-out: late answers of the old session are dropped
  };

  function $(id) {
    return document.getElementById(id);
  }

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (key) {
        var value = attrs[key];
        if (value === null || value === undefined || value === false) return;
        if (key === "text") node.textContent = value;
        else if (key === "class") node.className = value;
        else if (key.slice(0, 5) === "data-" || key.slice(0, 5) === "aria-" || key === "role" || key === "for" || key === "title" || key === "type" || key === "href" || key === "target" || key === "rel") node.setAttribute(key, value === true ? "" : String(value));
        else node[key] = value;
      });
    }
    (children || []).forEach(function (child) {
      if (child === null || child === undefined || child === false) return;
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  function show(node, visible) {
    node.hidden = !visible;
  }

  function setText(node, text) {
    var value = text === null || text === undefined ? "" : String(text);
    if (node.textContent !== value) node.textContent = value;
  }

  function sleep(ms, signal) {
    return new Promise(function (resolve) {
      var t = setTimeout(resolve, ms);
      if (signal) signal.addEventListener("abort", function () { clearTimeout(t); resolve(); }, { once: true });
    });
  }

  function capitalise(s) {
    s = String(s || "");
    return s.charAt(0).toUpperCase() + s.slice(1);
  }

  function clock(at) {
    if (!at) return "";
    var d = new Date(at);
    return isNaN(d) ? "" : d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  // A time of day when it is within the next day, else a short date and time.
  function shortTime(at) {
    var d = new Date(at);
    if (isNaN(d)) return String(at);
    var ahead = d.getTime() - Date.now();
    if (ahead > -3600e3 && ahead < 20 * 3600e3) return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    return d.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
  }

  function dateTime(at) {
    if (!at) return "";
    var d = new Date(at);
    return isNaN(d) ? String(at) : d.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
  }

  function authHeaders(extra, token) {
    var headers = Object.assign({}, extra || {});
    var t = token === undefined ? state.token : token;
    if (t) headers.Authorization = "Bearer " + t;
    return headers;
  }

  // ---- the API ------------------------------------------------------------------------------

  function ApiError(status, reason, message, signIn) {
    this.status = status;
    this.reason = reason || "";
    this.message = message;
    this.signIn = signIn || null; // where to sign in with the site's provider, when it has one
  }
  ApiError.prototype = Object.create(Error.prototype);

  function errorFrom(res, text) {
    var body = null;
    try { body = text ? JSON.parse(text) : null; } catch (_) { body = null; }
    var message = body && typeof body.error === "string" && body.error
      ? body.error
      : res.status + " " + (res.statusText || "error") + (text && !body ? ": " + text.slice(0, 200) : "");
    var signIn = body && typeof body.signIn === "string" && body.signIn.charAt(0) === "/" ? body.signIn : null;
    return new ApiError(res.status, body && body.reason, message, signIn);
  }

  // opts.token: use this token instead of the session's (null: none); opts.quiet401: don't treat
  // a 401 as the end of the session.
  function api(method, path, body, opts) {
    opts = opts || {};
    var gen = state.generation;
    var headers = authHeaders({ Accept: "application/json" }, opts.token);
    if (body !== undefined) headers["Content-Type"] = "application/json";
    return fetch(API + path, {
      method: method,
      headers: headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "same-origin",
    }).then(
      function (res) {
        return res.text().then(function (text) {
          if (!res.ok) {
            var err = errorFrom(res, text);
            if (res.status === 401 && !opts.quiet401 && gen === state.generation) sessionEnded(err);
            throw err;
          }
          if (!text) return null;
          try { return JSON.parse(text); } catch (_) { throw new ApiError(res.status, "", "The server sent an answer that is not JSON."); }
        });
      },
      function (e) {
        throw new ApiError(0, "", "The server could not be reached (" + (e && e.message ? e.message : e) + ").");
      }
    );
  }

  // ---- signing in ---------------------------------------------------------------------------

  function banner(message) {
    setText($("banner"), message || "");
    show($("banner"), !!message);
  }

  function boot() {
    var gen = state.generation;
    show($("loading"), true);
    show($("signin"), false);
    show($("app"), false);
    var stored = null;
    try { stored = sessionStorage.getItem(TOKEN_KEY); } catch (_) { stored = null; }
    var first = stored
      ? api("GET", "me", undefined, { token: stored, quiet401: true }).then(
          function (me) { return { me: me, token: stored }; },
          function (e) {
            if (e.status !== 401) throw e;
            forgetToken();
            return null;
          }
        )
      : Promise.resolve(null);
    first
      .then(function (found) {
        if (found) return found;
        // No token, or it was refused: maybe an authenticating proxy vouches for us.
        return api("GET", "me", undefined, { token: null, quiet401: true }).then(function (me) {
          return { me: me, token: null };
        });
      })
      .then(
        function (found) {
          if (gen !== state.generation) return;
          banner("");
          state.token = found.token;
          signedIn(found.me);
        },
        function (e) {
          if (gen !== state.generation) return;
          show($("loading"), false);
          if (e.status === 401) {
            banner("");
            offerProvider(e.signIn);
            showSignin(stored ? "Your saved token is no longer accepted. Sign in again." : "");
          } else {
            banner("The workspace service is not available: " + e.message + " Retrying…");
            setTimeout(function () { if (gen === state.generation) boot(); }, 5000);
          }
        }
      );
  }

  // The site's sign-in, when the backend has one: back to this very page once signed in.
  function offerProvider(signIn) {
    if (signIn) {
      $("signin-provider-link").href =
        signIn + "?to=" + encodeURIComponent(location.pathname + location.search);
    }
    show($("signin-provider"), !!signIn);
  }

  function forgetToken() {
    state.token = null;
    try { sessionStorage.removeItem(TOKEN_KEY); } catch (_) { /* private mode */ }
  }

  function showSignin(message) {
    show($("loading"), false);
    show($("app"), false);
    show($("account"), false);
    show($("signin"), true);
    setText($("signin-error"), message || "");
    show($("signin-error"), !!message);
    $("signin-token").focus();
  }

  function signinSubmit(ev) {
    ev.preventDefault();
    var token = $("signin-token").value.trim().replace(/^bearer\s+/i, "");
    if (!token) {
      setText($("signin-error"), "Paste a token first.");
      show($("signin-error"), true);
      return;
    }
    var button = $("signin-submit");
    button.disabled = true;
    setText(button, "Signing in…");
    show($("signin-error"), false);
    api("GET", "me", undefined, { token: token, quiet401: true })
      .then(
        function (me) {
          try { sessionStorage.setItem(TOKEN_KEY, token); } catch (_) { /* kept in memory only */ }
          state.token = token;
          $("signin-token").value = "";
          signedIn(me);
        },
        function (e) {
          setText($("signin-error"), e.status === 401 ? "The cluster did not accept this token: " + e.message : e.message);
          show($("signin-error"), true);
        }
      )
      .then(function () {
        button.disabled = false;
        setText(button, "Sign in");
      });
  }

  function signedIn(me) {
    state.me = me || {};
    show($("loading"), false);
    show($("signin"), false);
    show($("app"), true);
    show($("account"), true);
    setText($("whoami"), state.me.user || state.me.username || "unknown");
    var about = [];
    if (state.me.username && state.me.username !== state.me.user) about.push("Authenticated as " + state.me.username);
    if (state.me.groups && state.me.groups.length) about.push("Groups: " + state.me.groups.join(", "));
    $("whoami").title = about.join("\n");
    show($("admin-badge"), !!state.me.admin);
    show($("signout"), !!state.token || state.me.via === "session");
    show($("all-toggle"), !!state.me.admin);
    loadCatalogue();
    refresh();
    clearInterval(state.timer);
    state.timer = setInterval(function () {
      if (!document.hidden) refresh();
    }, REFRESH_MS);
  }

  function stopAll() {
    state.generation++;
    clearInterval(state.timer);
    state.timer = null;
    state.streams.forEach(function (s) { s.controller.abort(); });
    state.streams.clear();
    state.cards.forEach(function (card) { card.root.remove(); });
    state.cards.clear();
    state.rows.forEach(function (rec) { rec.tr.remove(); });
    state.rows.clear();
    state.ended.clear();
    state.gone.clear();
    state.revealed.clear();
    state.me = null;
    updateActivityEmpty();
  }

  function sessionEnded(err) {
    var hadToken = !!state.token;
    stopAll();
    forgetToken();
    if (hadToken) showSignin("Your session ended (" + err.message + "). Sign in again.");
    else boot();
  }

  function signOut(ev) {
    ev.preventDefault();
    var session = state.me && state.me.via === "session";
    stopAll();
    forgetToken();
    if (!session) {
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

  // ---- the catalogue and the launch form ----------------------------------------------------

  function loadCatalogue() {
    var gen = state.generation;
    api("GET", "catalogue").then(
      function (data) {
        if (gen !== state.generation) return;
        state.catalogue = (data && Array.isArray(data.items) ? data.items : []).filter(function (e) { return e && e.name; });
        state.clusters = (data && Array.isArray(data.clusters) ? data.clusters : []).filter(function (c) { return c && c.name; });
        renderCatalogue();
      },
      function (e) {
        if (gen !== state.generation || e.status === 401) return;
        state.catalogue = [];
        renderCatalogue();
        formError("Could not load the catalogue: " + e.message);
      }
    );
  }

  function renderCatalogue() {
    var select = $("catalogue-select");
    var previous = select.value;
    select.replaceChildren();
    if (!state.catalogue.length) {
      select.append(el("option", { value: "", text: "No workspace types are available" }));
      select.disabled = true;
    } else {
      select.disabled = false;
      state.catalogue.forEach(function (entry) {
        select.append(el("option", {
          value: entry.name,
          text: (entry.title || entry.name) + (entry.error ? " (unavailable)" : ""),
          disabled: !!entry.error,
        }));
      });
      var keep = state.catalogue.some(function (e) { return e.name === previous && !e.error; });
      var firstGood = state.catalogue.find(function (e) { return !e.error; });
      select.value = keep ? previous : (firstGood || state.catalogue[0]).name;
    }
    renderEntry();
  }

  function currentEntry() {
    var name = $("catalogue-select").value;
    return state.catalogue.find(function (e) { return e.name === name; }) || null;
  }

  function renderEntry() {
    var entry = currentEntry();
    setText($("entry-description"), entry ? entry.description || "" : "");
    show($("entry-description"), !!(entry && entry.description));
    setText($("entry-error"), entry && entry.error ? "This workspace type can't be launched: " + entry.error : "");
    show($("entry-error"), !!(entry && entry.error));
    var list = $("fields-list");
    list.replaceChildren();
    var fields = entry && !entry.error && Array.isArray(entry.fields) ? entry.fields : [];
    fields.forEach(function (field, i) {
      var id = "field-" + i;
      var def = field["default"] === null || field["default"] === undefined ? "" : String(field["default"]);
      var input = el("input", {
        type: "text",
        id: id,
        "data-test": "field-" + field.container + "-" + field.name,
        "data-container": field.container,
        "data-name": field.name,
        spellcheck: false,
        autocomplete: "off",
        placeholder: def === "" ? "(empty by default)" : "",
      });
      input.value = def;
      list.append(el("div", { class: "field" }, [
        el("label", { for: id }, [
          el("span", { class: "field-container", text: field.container }),
          el("span", { class: "field-sep", text: " / " }),
          el("span", { class: "field-name", text: field.name }),
        ]),
        input,
      ]));
    });
    show($("fields"), fields.length > 0);
    renderClusters(entry);
    updateLaunchButton();
  }

  // With more than one cluster, the user picks where; an entry that names its cluster fixes it.
  function renderClusters(entry) {
    var select = $("cluster-select");
    var previous = select.value;
    select.replaceChildren();
    state.clusters.forEach(function (c) {
      select.append(el("option", {
        value: c.name,
        text: c.name + (c.reachable === false ? " (unreachable)" : ""),
        disabled: c.reachable === false,
      }));
    });
    var fixed = entry && entry.cluster;
    var keep = state.clusters.some(function (c) { return c.name === previous && c.reachable !== false; });
    if (fixed) select.value = fixed;
    else if (keep) select.value = previous;
    else if (state.clusters.length) select.value = state.clusters[0].name;
    select.disabled = !!fixed;
    show($("cluster-choice"), state.clusters.length > 1);
  }

  function updateLaunchButton() {
    var entry = currentEntry();
    $("launch").disabled = !entry || !!entry.error || $("launch-form").dataset.busy === "true";
  }

  function formError(message) {
    setText($("form-error"), message || "");
    show($("form-error"), !!message);
  }

  function formWarnings(warnings) {
    var box = $("form-warnings");
    box.replaceChildren();
    if (warnings && warnings.length) {
      box.append(el("p", { class: "warnings-title", text: "Launched, with warnings:" }));
      var ul = el("ul");
      warnings.forEach(function (w) { ul.append(el("li", { text: String(w) })); });
      box.append(ul);
    }
    show(box, !!(warnings && warnings.length));
  }

  function launch(ev) {
    ev.preventDefault();
    var form = $("launch-form");
    var entry = currentEntry();
    if (!entry || entry.error || form.dataset.busy === "true") return;
    formError("");
    formWarnings(null);
    var settings = {};
    Array.prototype.forEach.call($("fields-list").querySelectorAll("input[data-container]"), function (input) {
      var c = input.dataset.container;
      (settings[c] = settings[c] || {})[input.dataset.name] = input.value;
    });
    form.dataset.busy = "true";
    var button = $("launch");
    button.disabled = true;
    setText(button, "Launching…");
    var gen = state.generation;
    var request = { manifest: entry.name, settings: settings };
    if (state.clusters.length > 1 && !entry.cluster) request.cluster = $("cluster-select").value;
    api("POST", "workspaces", request)
      .then(
        function (ws) {
          if (gen !== state.generation || !ws || !ws.name) return;
          state.gone.delete(ws.name);
          state.ended.delete(ws.name);
          formWarnings(Array.isArray(ws.warnings) ? ws.warnings : null);
          upsertRow(ws);
          placeRows();
          follow(ws.name, "create");
          state.launchSeq++;
          form.dataset.launched = ws.name;
          form.dataset.launchSeq = String(state.launchSeq);
          refresh();
        },
        function (e) {
          if (gen !== state.generation || e.status === 401) return;
          formError(e.message);
        }
      )
      .then(function () {
        form.dataset.busy = "false";
        setText(button, "Launch");
        updateLaunchButton();
      });
  }

  // ---- the list of workspaces ---------------------------------------------------------------

  function refresh() {
    if (!state.me) return Promise.resolve();
    var seq = ++state.refreshSeq;
    var gen = state.generation;
    return api("GET", "workspaces" + (state.showAll ? "?all=true" : "")).then(
      function (data) {
        if (seq !== state.refreshSeq || gen !== state.generation) return;
        show($("list-error"), false);
        renderList(data && Array.isArray(data.items) ? data.items : []);
      },
      function (e) {
        if (seq !== state.refreshSeq || gen !== state.generation || e.status === 401) return;
        setText($("list-error"), "Could not refresh the list: " + e.message);
        show($("list-error"), true);
      }
    );
  }

  function renderList(items) {
    var listed = new Set();
    items.forEach(function (ws) { if (ws && ws.name) listed.add(ws.name); });
    state.gone.forEach(function (name) { if (!listed.has(name)) state.gone.delete(name); });
    items.forEach(function (ws) {
      if (!ws || !ws.name || state.gone.has(ws.name)) return;
      upsertRow(ws);
    });
    state.rows.forEach(function (rec, name) {
      var keep = listed.has(name) && !state.gone.has(name);
      // A workspace just created may not be listed yet: keep it while its create is followed.
      var s = state.streams.get(name);
      if (!keep && !(s && s.kind === "create" && !state.gone.has(name))) removeRow(name);
    });
    placeRows();
    // Follow creates and deletes already under way (our own workspaces only).
    state.rows.forEach(function (rec, name) {
      var ws = rec.ws;
      if (state.streams.has(name)) return;
      if (state.me && ws.user && state.me.user && ws.user !== state.me.user) return;
      if (ws.status !== "creating" && ws.status !== "deleting") return;
      var ended = state.ended.get(name);
      if (ended && Date.now() - ended.at < 30000) {
        if (ws.status === "creating" && (ended.status === "ready" || ended.status === "failed" || ended.status === "deleted")) return;
        if (ws.status === "deleting" && ended.status === "deleted") return;
        if (ended.status === "lost") return;
      }
      follow(name, ws.status === "creating" ? "create" : "delete");
    });
    state.cards.forEach(function (card, name) {
      var rec = state.rows.get(name);
      if (rec) card.setUrl(rec.ws.url);
    });
  }

  function placeRows() {
    var tbody = $("workspace-rows");
    var recs = Array.from(state.rows.values()).sort(function (a, b) {
      var ca = a.ws.created || "", cb = b.ws.created || "";
      if (ca !== cb) return ca < cb ? 1 : -1; // newest first
      return a.ws.name < b.ws.name ? -1 : a.ws.name > b.ws.name ? 1 : 0;
    });
    var current = Array.from(tbody.children);
    var inOrder = current.length === recs.length && recs.every(function (r, i) { return current[i] === r.tr; });
    if (!inOrder) recs.forEach(function (r) { tbody.append(r.tr); });
    show($("list-empty"), recs.length === 0);
    show($("table-wrap"), recs.length > 0);
    var all = state.showAll;
    document.querySelectorAll(".col-user").forEach(function (node) { show(node, all); });
  }

  // What the list says can lag behind the progress stream: trust the stream for a while.
  var STALE = {
    ready: ["creating"], failed: ["creating"], deleting: ["creating", "ready", "failed", "stopping", "stopped"],
    creating: ["stopped"], deleted: ["creating", "ready", "failed", "deleting", "stopping", "stopped"],
    stopping: ["creating", "ready", "failed"], stopped: ["creating", "ready", "failed", "stopping"],
  };

  function shownStatus(rec) {
    var listed = rec.ws.status || "unknown";
    var live = rec.live;
    if (!live) return listed;
    var fresh = state.streams.has(rec.ws.name) || Date.now() - live.at < 15000;
    if (fresh && (STALE[live.status] || []).indexOf(listed) >= 0) return live.status;
    return listed;
  }

  function upsertRow(ws) {
    var rec = state.rows.get(ws.name);
    if (!rec) {
      rec = makeRow(ws.name);
      state.rows.set(ws.name, rec);
    }
    rec.ws = ws;
    updateRow(rec);
    return rec;
  }

  function removeRow(name) {
    var rec = state.rows.get(name);
    if (!rec) return;
    rec.tr.remove();
    state.rows.delete(name);
  }

  function makeRow(name) {
    var rec = { confirming: false, tokensKey: null, urlKey: null };
    rec.nameStrong = el("strong", { class: "ws-name", text: name });
    rec.manifestMeta = el("div");
    rec.limitsMeta = el("div");
    rec.clusterMeta = el("div", { "data-test": "row-cluster" });
    rec.nameMeta = el("div", { class: "ws-meta" }, [rec.manifestMeta, rec.clusterMeta, rec.limitsMeta]);
    rec.userCell = el("td", { class: "col-user", "data-label": "User" });
    rec.badge = el("span", { class: "badge" });
    rec.phaseText = el("div", { class: "ws-phase" });
    rec.messageText = el("div", { class: "ws-message" });
    rec.miniFill = el("span", { class: "mini-fill" });
    rec.miniLabel = el("span", { class: "mini-label" });
    rec.mini = el("div", { class: "mini", "data-test": "row-progress", hidden: true }, [
      el("span", { class: "mini-bar", "aria-hidden": "true" }, [rec.miniFill]),
      rec.miniLabel,
    ]);
    rec.ageCell = el("td", { class: "ws-age", "data-label": "Age" });
    rec.urlCell = el("td", { class: "ws-url", "data-label": "URL" });
    rec.tokensCell = el("td", { class: "ws-tokens", "data-label": "Tokens" });

    rec.deleteBtn = el("button", { type: "button", class: "btn btn-danger-outline btn-small", "data-test": "delete", text: "Delete" });
    rec.confirmBtn = el("button", { type: "button", class: "btn btn-danger btn-small", "data-test": "delete-confirm", text: "Yes, delete" });
    rec.cancelBtn = el("button", { type: "button", class: "btn btn-ghost btn-small", "data-test": "delete-cancel", text: "Cancel" });
    rec.confirmBox = el("div", { class: "confirm", role: "group", "aria-label": "Confirm delete of " + name, hidden: true }, [
      rec.confirmBtn,
      rec.cancelBtn,
    ]);
    rec.stopBtn = el("button", { type: "button", class: "btn btn-ghost btn-small", "data-test": "stop", text: "Stop" });
    rec.startBtn = el("button", { type: "button", class: "btn btn-small", "data-test": "start", text: "Start" });
    rec.shareBtn = el("button", { type: "button", class: "btn btn-ghost btn-small", "data-test": "share", text: "Share" });
    rec.shareBtn.addEventListener("click", function () { toggleSharing(rec); });
    rec.stopBtn.addEventListener("click", function () { stopOrStart(rec, "stop"); });
    rec.startBtn.addEventListener("click", function () { stopOrStart(rec, "start"); });
    rec.deleteBtn.addEventListener("click", function () {
      rec.confirming = true;
      updateRow(rec);
      rec.confirmBtn.focus();
    });
    rec.cancelBtn.addEventListener("click", function () {
      rec.confirming = false;
      updateRow(rec);
      rec.deleteBtn.focus();
    });
    rec.confirmBtn.addEventListener("click", function () {
      rec.confirming = false;
      deleteWorkspace(rec);
    });

    rec.tr = el("tr", { class: "ws-row", "data-test": "workspace-row", "data-name": name }, [
      el("td", { class: "ws-name-cell", "data-label": "Name" }, [rec.nameStrong, rec.nameMeta]),
      rec.userCell,
      el("td", { "data-label": "Status" }, [rec.badge]),
      el("td", { class: "ws-phase-cell", "data-label": "Phase" }, [rec.phaseText, rec.messageText, rec.mini]),
      rec.ageCell,
      rec.urlCell,
      rec.tokensCell,
      el("td", { class: "ws-actions" }, [rec.shareBtn, rec.stopBtn, rec.startBtn, rec.deleteBtn, rec.confirmBox]),
    ]);
    rec.sharing = makeSharing(rec, name);
    return rec;
  }

  function updateRow(rec) {
    var ws = rec.ws;
    var status = shownStatus(rec);
    if (rec.tr.dataset.status !== status) rec.tr.dataset.status = status;
    rec.badge.className = "badge status status-" + status.replace(/[^a-z]/g, "");
    setText(rec.badge, status);

    rec.nameMeta.title = ws.expires ? "Expires " + dateTime(ws.expires) : "";
    var limits = [];
    if (ws.expires) limits.push("expires " + shortTime(ws.expires));
    if (ws.idleTimeout) limits.push("idle " + ws.idleTimeout);
    setText(rec.manifestMeta, ws.manifest || "");
    setText(rec.limitsMeta, limits.join(" · "));
    var cluster = ws.cluster || {};
    var several = state.clusters.length > 1 || cluster.reachable === false;
    setText(rec.clusterMeta, several && cluster.name ? "on " + cluster.name + (cluster.reachable === false ? " (unreachable)" : "") : "");
    show(rec.clusterMeta, several && !!cluster.name);
    setText(rec.userCell, ws.user || "");

    // Phase and message: live from the stream while one runs, else from the list.
    var s = state.streams.get(ws.name);
    var p = s && s.last;
    var phase = p ? p.phase : ws.phase;
    var message = p ? p.message : ws.message;
    if (status === "ready" && !p) phase = null;
    setText(rec.phaseText, phase ? capitalise(phase) : "");
    show(rec.phaseText, !!phase);
    setText(rec.messageText, message || (phase ? "" : status === "ready" ? "Running" : "—"));
    rec.messageText.classList.toggle("muted", !message);
    if (s) {
      var pct = p ? clampPercent(p.percent) : 0;
      rec.miniFill.style.width = pct + "%";
      setText(rec.miniLabel, pct + "%");
      rec.mini.classList.toggle("mini-delete", s.kind === "delete");
    }
    show(rec.mini, !!s);

    setText(rec.ageCell, ws.age || "");
    rec.ageCell.title = ws.created ? "Created " + dateTime(ws.created) : "";

    var urlKey = (ws.url || "") + "\n" + (ws.sshUrl || "");
    if (urlKey !== rec.urlKey) {
      rec.urlKey = urlKey;
      rec.urlCell.replaceChildren();
      if (ws.url) {
        var a = el("a", { href: ws.url, target: "_blank", rel: "noopener noreferrer", class: "ws-link", "data-test": "workspace-url", title: ws.url }, [
          el("span", { class: "ws-link-text", text: ws.url.replace(/^https?:\/\//, "") }),
          el("span", { class: "ext", "aria-hidden": "true", text: "↗" }),
        ]);
        a.addEventListener("click", function () { touch(ws.name); });
        rec.urlCell.append(a);
      }
      if (ws.sshUrl) rec.urlCell.append(el("div", { class: "ws-ssh" }, [el("code", { text: ws.sshUrl })]));
      if (!ws.url && !ws.sshUrl) rec.urlCell.append(el("span", { class: "muted", text: "—" }));
    }

    var tokens = ws.tokens && typeof ws.tokens === "object" ? ws.tokens : {};
    var tokensKey = JSON.stringify(tokens);
    if (tokensKey !== rec.tokensKey) {
      rec.tokensKey = tokensKey;
      renderTokens(rec, tokens);
    }

    var busy = status === "deleting" || (s && s.kind === "delete");
    rec.deleteBtn.disabled = !!busy;
    setText(rec.deleteBtn, busy ? "Deleting…" : "Delete");
    if (busy) rec.confirming = false;
    show(rec.deleteBtn, !rec.confirming);
    show(rec.confirmBox, rec.confirming);
    var stoppable = !busy && !rec.confirming && (status === "ready" || status === "creating" || status === "failed");
    show(rec.stopBtn, stoppable || status === "stopping");
    rec.stopBtn.disabled = status === "stopping" || !!rec.acting;
    setText(rec.stopBtn, status === "stopping" ? "Stopping…" : "Stop");
    show(rec.startBtn, !busy && !rec.confirming && status === "stopped");
    rec.startBtn.disabled = !!rec.acting;
    // Sharing is the workspace proxy's (proxyDomain), for workspaces of the native API.
    show(rec.shareBtn, !!state.me.proxy && !busy && !rec.confirming && status !== "deleted");
  }

  // ---- sharing through the workspace proxy ------------------------------------------------

  function makeSharing(rec, name) {
    var sh = { name: name };
    sh.level = el("select", { "data-test": "share-level", "aria-label": "Who may open " + name }, [
      el("option", { value: "owner", text: "Only me, and those named" }),
      el("option", { value: "authenticated", text: "Everyone signed in" }),
      el("option", { value: "public", text: "Anyone with the link" }),
    ]);
    sh.users = el("input", { type: "text", "data-test": "share-users", placeholder: "users, comma-separated", "aria-label": "Users" });
    sh.groups = el("input", { type: "text", "data-test": "share-groups", placeholder: "groups, comma-separated", "aria-label": "Groups" });
    sh.save = el("button", { type: "button", class: "btn btn-small", "data-test": "share-save", text: "Save" });
    sh.note = el("span", { class: "muted", "data-test": "share-note", role: "status" });
    sh.save.addEventListener("click", function () { saveSharing(rec); });
    sh.box = el("div", { class: "sharing", "data-test": "sharing", hidden: true }, [sh.level, sh.users, sh.groups, sh.save, sh.note]);
    rec.tr.querySelector(".ws-actions").append(sh.box);
    return sh;
  }

  function names(text) {
    return text.split(",").map(function (n) { return n.trim(); }).filter(function (n) { return n; });
  }

  function toggleSharing(rec) {
    var sh = rec.sharing;
    var opening = sh.box.hidden;
    show(sh.box, opening);
    if (!opening) return;
    setText(sh.note, "Loading…");
    api("GET", "workspaces/" + encodeURIComponent(sh.name) + "/sharing").then(
      function (sharing) {
        sh.level.value = sharing.level || "owner";
        sh.users.value = (sharing.users || []).join(", ");
        sh.groups.value = (sharing.groups || []).join(", ");
        setText(sh.note, "");
      },
      function (e) { setText(sh.note, e.message); }
    );
  }

  function saveSharing(rec) {
    var sh = rec.sharing;
    var body = { level: sh.level.value, users: names(sh.users.value), groups: names(sh.groups.value) };
    sh.save.disabled = true;
    setText(sh.note, "Saving…");
    api("PUT", "workspaces/" + encodeURIComponent(sh.name) + "/sharing", body).then(
      function () { setText(sh.note, "Saved"); },
      function (e) { setText(sh.note, e.message); }
    ).then(function () { sh.save.disabled = false; });
  }

  function renderTokens(rec, tokens) {
    var name = rec.ws.name;
    var cell = rec.tokensCell;
    cell.replaceChildren();
    var keys = Object.keys(tokens);
    if (!keys.length) {
      cell.append(el("span", { class: "muted", text: "—" }));
      return;
    }
    keys.sort().forEach(function (container) {
      var value = String(tokens[container]);
      var id = name + "/" + container;
      var code = el("code", { class: "token-value", "data-test": "token-value" });
      var showBtn = el("button", { type: "button", class: "btn btn-link btn-tiny", "data-test": "token-show" });
      var copyBtn = el("button", { type: "button", class: "btn btn-link btn-tiny", "data-test": "token-copy", text: "Copy" });
      function paint() {
        var open = state.revealed.has(id);
        setText(code, open ? value : "••••••••");
        code.classList.toggle("masked", !open);
        setText(showBtn, open ? "Hide" : "Show");
        showBtn.setAttribute("aria-pressed", open ? "true" : "false");
        showBtn.setAttribute("aria-label", (open ? "Hide" : "Show") + " the " + container + " token");
      }
      showBtn.addEventListener("click", function () {
        if (state.revealed.has(id)) state.revealed.delete(id);
        else state.revealed.add(id);
        paint();
      });
      copyBtn.setAttribute("aria-label", "Copy the " + container + " token");
      copyBtn.addEventListener("click", function () {
        copyText(value).then(function (ok) {
          setText(copyBtn, ok ? "Copied" : "Copy failed");
          copyBtn.classList.toggle("copied", ok);
          setTimeout(function () { setText(copyBtn, "Copy"); copyBtn.classList.remove("copied"); }, 1500);
        });
      });
      paint();
      cell.append(el("div", { class: "token", "data-test": "token", "data-container": container }, [
        el("span", { class: "token-name", text: container }),
        code,
        showBtn,
        copyBtn,
      ]));
    });
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).then(function () { return true; }, function () { return legacyCopy(text); });
    }
    return Promise.resolve(legacyCopy(text));
  }

  function legacyCopy(text) {
    var area = el("textarea", { readOnly: true, class: "offscreen" });
    area.value = text;
    document.body.append(area);
    area.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (_) { ok = false; }
    area.remove();
    return ok;
  }

  function touch(name) {
    api("POST", "workspaces/" + encodeURIComponent(name) + "/activity", {}).catch(function () { /* best effort */ });
  }

  // A stop keeps the workspace (name, values, storage) without its pod; a start brings the pod
  // back, and its progress is followed as a launch's.
  function stopOrStart(rec, verb) {
    var name = rec.ws.name;
    var gen = state.generation;
    rec.acting = true;
    updateRow(rec);
    show($("list-error"), false);
    api("POST", "workspaces/" + encodeURIComponent(name) + "/" + verb, {}).then(
      function () {
        if (gen !== state.generation) return;
        if (verb === "stop") {
          var s = state.streams.get(name);
          if (s) s.controller.abort();
          rec.live = { status: "stopping", at: Date.now() };
        } else {
          state.ended.delete(name);
          follow(name, "create");
        }
        refresh();
      },
      function (e) {
        if (gen !== state.generation || e.status === 401) return;
        setText($("list-error"), "Could not " + verb + " " + name + ": " + e.message);
        show($("list-error"), true);
      }
    ).then(function () {
      rec.acting = false;
      updateRow(rec);
    });
  }

  function deleteWorkspace(rec) {
    var name = rec.ws.name;
    var gen = state.generation;
    rec.deleteBtn.disabled = true;
    show($("list-error"), false);
    api("DELETE", "workspaces/" + encodeURIComponent(name)).then(
      function () {
        if (gen !== state.generation) return;
        rec.live = { status: "deleting", at: Date.now() };
        state.ended.delete(name);
        follow(name, "delete");
        refresh();
      },
      function (e) {
        if (gen !== state.generation || e.status === 401) return;
        if (e.status === 404) {
          state.gone.add(name);
          removeRow(name);
          placeRows();
          refresh();
          return;
        }
        updateRow(rec);
        setText($("list-error"), "Could not delete " + name + ": " + e.message);
        show($("list-error"), true);
      }
    );
  }

  // ---- live progress ------------------------------------------------------------------------

  function clampPercent(v) {
    var n = Math.round(Number(v));
    if (!isFinite(n)) return 0;
    return Math.max(0, Math.min(100, n));
  }

  function follow(name, kind) {
    var old = state.streams.get(name);
    if (old) old.controller.abort();
    var card = cardFor(name);
    card.reset(kind);
    var s = { name: name, kind: kind, controller: new AbortController(), last: null, done: false, gen: state.generation };
    state.streams.set(name, s);
    var rec = state.rows.get(name);
    if (rec) {
      rec.live = { status: kind === "create" ? "creating" : "deleting", at: Date.now() };
      updateRow(rec);
    }
    runStream(s, card);
  }

  function endStream(s, status) {
    s.done = true;
    if (state.streams.get(s.name) === s) state.streams.delete(s.name);
    state.ended.set(s.name, { status: status, at: Date.now() });
    var rec = state.rows.get(s.name);
    if (rec) updateRow(rec);
  }

  function runStream(s, card) {
    var signal = s.controller.signal;
    var attempt = 0;
    function once() {
      if (s.done || signal.aborted) return Promise.resolve();
      return fetch(API + "workspaces/" + encodeURIComponent(s.name) + "/progress", {
        headers: authHeaders({ Accept: "text/event-stream" }),
        cache: "no-store",
        credentials: "same-origin",
        signal: signal,
      })
        .then(function (res) {
          if (!res.ok) {
            return res.text().then(function (text) {
              var err = errorFrom(res, text);
              if (res.status === 401) {
                if (s.gen === state.generation) sessionEnded(err);
                endStream(s, "lost");
                return;
              }
              if (res.status === 404 && s.kind === "delete") {
                // Already gone before we could watch it go.
                var p = { workspace: s.name, status: "deleted", percent: 100, phase: null, message: "Deleted.", steps: [], warning: null };
                onEvent(s, card, "deleted", p);
                return;
              }
              if (res.status === 404 || res.status === 403) {
                card.problem(err.message);
                endStream(s, "lost");
                return;
              }
              throw err;
            });
          }
          if (!res.body || !res.body.getReader) throw new Error("this browser can't read a response as a stream");
          card.problem("");
          return readSse(res.body, function (event, data) {
            attempt = 0;
            var p;
            try { p = JSON.parse(data); } catch (_) { return true; }
            if (!p || typeof p !== "object") return true;
            return onEvent(s, card, event, p);
          });
        })
        .then(
          function () {
            if (s.done || signal.aborted) return;
            throw new Error("the stream closed early");
          }
        )
        .catch(function (e) {
          if (s.done || signal.aborted) return;
          attempt++;
          if (attempt > 8) {
            card.problem("Lost the progress stream (" + (e && e.message) + "). The list below still updates.");
            endStream(s, "lost");
            return;
          }
          card.problem("Reconnecting to the progress stream (" + (e && e.message) + ")…");
          return sleep(Math.min(500 * attempt, 5000), signal).then(once);
        });
    }
    return once();
  }

  // Reads Server-Sent Events from a byte stream; onEvent(name, data) returns false to stop.
  function readSse(body, onEvent) {
    var reader = body.getReader();
    var decoder = new TextDecoder();
    var buf = "";
    var event = "";
    var data = [];
    var stopped = false;

    function line(text) {
      if (text === "") {
        if (data.length) {
          if (onEvent(event || "message", data.join("\n")) === false) stopped = true;
        }
        event = "";
        data = [];
        return;
      }
      if (text.charAt(0) === ":") return; // keep-alive
      var colon = text.indexOf(":");
      var field = colon < 0 ? text : text.slice(0, colon);
      var value = colon < 0 ? "" : text.slice(colon + 1);
      if (value.charAt(0) === " ") value = value.slice(1);
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }

    function drain() {
      for (;;) {
        var i = buf.search(/[\r\n]/);
        if (i < 0) return;
        var len = 1;
        if (buf.charAt(i) === "\r") {
          if (i + 1 >= buf.length) return; // a "\n" may follow in the next chunk
          if (buf.charAt(i + 1) === "\n") len = 2;
        }
        var text = buf.slice(0, i);
        buf = buf.slice(i + len);
        line(text);
        if (stopped) return;
      }
    }

    function pump() {
      return reader.read().then(function (chunk) {
        if (chunk.done) {
          buf += decoder.decode();
          drain();
          return;
        }
        buf += decoder.decode(chunk.value, { stream: true });
        drain();
        if (stopped) return;
        return pump();
      });
    }

    return pump().then(
      function () { reader.cancel().catch(function () {}); },
      function (e) { reader.cancel().catch(function () {}); throw e; }
    );
  }

  function onEvent(s, card, event, p) {
    if (s.done || s.gen !== state.generation) return false;
    var final = FINAL[event] === true;
    if (!final && event !== "progress" && event !== "message") return true;
    s.last = p;
    var status = final ? event : String(p.status || "");
    card.update(p, status);
    var rec = state.rows.get(s.name);
    if (rec) {
      rec.live = { status: status, at: Date.now() };
      updateRow(rec);
    }
    if (!final) return true;
    card.finish(event, p);
    endStream(s, event);
    if (event === "deleted") {
      state.gone.add(s.name);
      removeRow(s.name);
      placeRows();
    }
    refresh();
    return false;
  }

  function updateActivityEmpty() {
    show($("activity-empty"), state.cards.size === 0);
  }

  function cardFor(name) {
    var card = state.cards.get(name);
    if (card) {
      // Bring it to the top.
      $("activity").insertBefore(card.root, $("activity-empty").nextSibling);
      return card;
    }
    card = makeCard(name);
    state.cards.set(name, card);
    var activity = $("activity");
    activity.insertBefore(card.root, $("activity-empty").nextSibling);
    // Keep the panel short: drop the oldest finished cards.
    var names = Array.from(activity.querySelectorAll(".progress-card")).map(function (n) { return n.dataset.workspace; });
    for (var i = names.length - 1; i >= 0 && state.cards.size > MAX_CARDS; i--) {
      if (!state.streams.has(names[i]) && names[i] !== name) {
        state.cards.get(names[i]).root.remove();
        state.cards.delete(names[i]);
      }
    }
    updateActivityEmpty();
    return card;
  }

  function makeCard(name) {
    var card = { url: "" };
    var title = el("h3", { class: "pc-title" }, [el("span", { class: "pc-name", text: name })]);
    card.kindLabel = el("span", { class: "pc-kind" });
    card.pill = el("span", { class: "badge status" });
    card.dismiss = el("button", { type: "button", class: "btn btn-ghost btn-icon", "aria-label": "Dismiss", title: "Dismiss", text: "×", hidden: true });
    card.dismiss.addEventListener("click", function () {
      card.root.remove();
      state.cards.delete(name);
      updateActivityEmpty();
    });
    card.fill = el("div", { class: "bar-fill" });
    card.bar = el("div", { class: "bar", "data-test": "progress-bar", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": "0", "aria-label": "Progress of " + name }, [card.fill]);
    card.percent = el("span", { class: "pc-percent", text: "0%" });
    card.phase = el("span", { class: "pc-phase" });
    card.message = el("span", { class: "pc-message" });
    card.now = el("p", { class: "pc-now" }, [card.phase, card.message]);
    card.steps = el("ol", { class: "steps" });
    card.note = el("p", { class: "pc-note", hidden: true });
    card.warning = el("p", { class: "pc-warning", "data-test": "progress-warning", hidden: true });
    card.outcome = el("div", { class: "pc-outcome", "data-test": "progress-outcome", hidden: true });
    card.root = el("article", { class: "progress-card", "data-test": "progress", "data-workspace": name, "data-status": "" }, [
      el("div", { class: "pc-head" }, [
        el("div", { class: "pc-heading" }, [title, card.kindLabel]),
        el("div", { class: "pc-tools" }, [card.pill, card.dismiss]),
      ]),
      el("div", { class: "pc-barline" }, [card.bar, card.percent]),
      card.now,
      card.steps,
      card.warning,
      card.note,
      card.outcome,
    ]);

    card.reset = function (kind) {
      card.kind = kind;
      card.root.dataset.kind = kind;
      card.root.dataset.status = "";
      delete card.root.dataset.percent;
      card.root.className = "progress-card live kind-" + kind;
      setText(card.kindLabel, kind === "create" ? "Creating" : "Deleting");
      setPill(kind === "create" ? "creating" : "deleting");
      card.setPercent(0);
      setText(card.phase, "");
      show(card.phase, false);
      setText(card.message, kind === "create" ? "Waiting for the first update…" : "Waiting for the delete to start…");
      card.now.classList.remove("both");
      show(card.now, true);
      card.steps.replaceChildren();
      card.stepItems = new Map();
      (STEP_ORDER[kind] || []).forEach(function (step) { card.step({ name: step, state: "pending" }); });
      show(card.warning, false);
      show(card.note, false);
      show(card.outcome, false);
      show(card.dismiss, false);
    };

    function setPill(status) {
      card.pill.className = "badge status status-" + status.replace(/[^a-z]/g, "");
      setText(card.pill, status);
    }

    card.setPercent = function (pct) {
      card.fill.style.width = pct + "%";
      card.bar.setAttribute("aria-valuenow", String(pct));
      setText(card.percent, pct + "%");
    };

    card.step = function (step) {
      var key = String(step.name || "");
      var item = card.stepItems.get(key);
      if (!item) {
        item = { icon: el("span", { class: "step-icon", "aria-hidden": "true" }) };
        item.name = el("span", { class: "step-name", text: capitalise(key) });
        item.stateText = el("span", { class: "sr-only" });
        item.message = el("span", { class: "step-message" });
        item.at = el("time", { class: "step-at" });
        item.li = el("li", { class: "step", "data-test": "progress-step", "data-step": key }, [
          item.icon,
          el("div", { class: "step-body" }, [item.name, item.stateText, item.message, item.at]),
        ]);
        card.stepItems.set(key, item);
        card.steps.append(item.li);
      }
      var st = String(step.state || "pending").replace(/[^a-z]/g, "");
      item.li.dataset.state = st;
      item.li.className = "step step-" + st;
      setText(item.stateText, " (" + st + ")");
      setText(item.message, step.message || "");
      show(item.message, !!step.message);
      setText(item.at, clock(step.at));
      if (step.at) item.at.setAttribute("datetime", step.at);
      if (st === "active") item.li.setAttribute("aria-current", "step");
      else item.li.removeAttribute("aria-current");
    };

    card.update = function (p, status) {
      var pct = clampPercent(p.percent);
      card.root.dataset.status = status;
      card.root.dataset.percent = String(pct);
      setPill(status);
      card.setPercent(pct);
      setText(card.phase, p.phase ? capitalise(p.phase) : "");
      show(card.phase, !!p.phase);
      setText(card.message, p.message || "");
      card.now.classList.toggle("both", !!(p.phase && p.message));
      show(card.now, !!(p.phase || p.message));
      if (Array.isArray(p.steps)) {
        var seen = new Set();
        p.steps.forEach(function (step) {
          if (!step || !step.name) return;
          seen.add(String(step.name));
          card.step(step);
        });
        // Steps the server does not report (e.g. the other kind's) are dropped.
        if (p.steps.length) {
          card.stepItems.forEach(function (item, key) {
            if (!seen.has(key)) { item.li.remove(); card.stepItems.delete(key); }
          });
          // Keep the server's order.
          p.steps.forEach(function (step) {
            var item = step && card.stepItems.get(String(step.name));
            if (item) card.steps.append(item.li);
          });
        }
      }
      setText(card.warning, p.warning ? "Cluster warning: " + p.warning : "");
      show(card.warning, !!p.warning && status !== "failed");
    };

    card.finish = function (event, p) {
      card.root.classList.remove("live");
      card.root.classList.add("done-" + event);
      show(card.dismiss, true);
      show(card.note, false);
      if (event === "ready") card.setPercent(100);
      var box = card.outcome;
      box.replaceChildren();
      box.className = "pc-outcome outcome-" + event;
      box.setAttribute("role", event === "failed" ? "alert" : "status");
      if (event === "ready") {
        box.append(el("strong", { text: "Ready." }), " ");
        card.link = el("span", { class: "pc-link" });
        box.append(card.link);
        card.setUrl(card.url || (state.rows.get(name) && state.rows.get(name).ws.url));
      } else if (event === "failed") {
        box.append(el("strong", { text: "The workspace did not start." }));
        box.append(el("p", { text: p.message || "No reason was given." }));
        if (p.warning) box.append(el("p", { class: "pc-failed-warning", text: "Cluster warning: " + p.warning }));
      } else {
        box.append(el("strong", { text: "Deleted." }), " ", "The workspace and its resources are gone.");
      }
      show(box, true);
      setText(card.kindLabel, event === "ready" ? "Created" : event === "failed" ? "Create failed" : "Deleted");
    };

    card.setUrl = function (url) {
      card.url = url || "";
      if (!card.link || !card.link.isConnected) return;
      card.link.replaceChildren();
      if (card.url) {
        var a = el("a", { href: card.url, target: "_blank", rel: "noopener noreferrer", text: "Open the workspace ↗" });
        a.addEventListener("click", function () { touch(name); });
        card.link.append(a);
      } else {
        card.link.append("It is listed below.");
      }
    };

    card.problem = function (message) {
      setText(card.note, message || "");
      show(card.note, !!message);
    };

    return card;
  }

  // ---- wiring -------------------------------------------------------------------------------

  function init() {
    $("launch-form").dataset.launchSeq = "0";
    $("launch-form").dataset.busy = "false";
    $("signin-form").addEventListener("submit", signinSubmit);
    $("signin-token").addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" && !ev.shiftKey) {
        ev.preventDefault();
        $("signin-form").requestSubmit ? $("signin-form").requestSubmit() : signinSubmit(ev);
      }
    });
    $("signout").addEventListener("click", signOut);
    $("launch-form").addEventListener("submit", launch);
    $("catalogue-select").addEventListener("change", function () {
      formError("");
      formWarnings(null);
      renderEntry();
    });
    $("refresh").addEventListener("click", function () { refresh(); });
    $("show-all").addEventListener("change", function (ev) {
      state.showAll = ev.target.checked;
      setText($("list-title"), state.showAll ? "All workspaces" : "My workspaces");
      refresh();
    });
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden) refresh();
    });
    boot();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
