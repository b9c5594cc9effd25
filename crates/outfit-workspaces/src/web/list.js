// "My workspaces": the list read again from the API, its rows kept in step, and what their
// Stop, Start and Delete buttons do.
import { $, show, showError } from "./dom.js";
import { follow } from "./progress.js";
import { followKind, keepsRow } from "./rows.js";
import { api, session } from "./session.js";
import { cards, ended, gone, page, rows, streams } from "./state.js";
import { makeRow, placeRows, removeRow, updateRow } from "./table.js";

// Reads the list again; answers of an older refresh or session are dropped.
export function refresh() {
  if (!session.me) return Promise.resolve();
  const seq = ++page.refreshSeq;
  const gen = session.generation;
  return api.call("GET", "workspaces" + (page.showAll ? "?all=true" : "")).then(
    (data) => {
      if (seq !== page.refreshSeq || gen !== session.generation) return;
      show($("list-error"), false);
      renderList(data && Array.isArray(data.items) ? data.items : []);
    },
    (e) => {
      if (seq !== page.refreshSeq || gen !== session.generation || e.status === 401) return;
      showError("list-error", "Could not refresh the list: " + e.message);
    }
  );
}

function renderList(items) {
  const listed = new Set(items.filter((ws) => ws && ws.name).map((ws) => ws.name));
  gone.forEach((name) => { if (!listed.has(name)) gone.delete(name); });
  for (const ws of items) {
    if (ws && ws.name && !gone.has(ws.name)) upsertRow(ws);
  }
  for (const name of Array.from(rows.keys())) {
    if (!keepsRow(name, listed, gone, streams.get(name))) removeRow(name);
  }
  placeRows();
  // Follow creates and deletes already under way.
  const now = Date.now();
  rows.forEach((rec, name) => {
    const kind = followKind(rec.ws, { me: session.me, streaming: streams.has(name), ended: ended.get(name), now });
    if (kind) follow(name, kind);
  });
  cards.forEach((card, name) => {
    const rec = rows.get(name);
    if (rec) card.setUrl(rec.ws.url);
  });
}

const rowActions = {
  stop: (rec) => stopOrStart(rec, "stop"),
  start: (rec) => stopOrStart(rec, "start"),
  remove: deleteWorkspace,
};

export function upsertRow(ws) {
  let rec = rows.get(ws.name);
  if (!rec) {
    rec = makeRow(ws.name, rowActions);
    rows.set(ws.name, rec);
  }
  rec.ws = ws;
  updateRow(rec);
  return rec;
}

// A stop keeps the workspace (name, values, storage) without its pod; a start brings the pod
// back, and its progress is followed as a launch's.
function stopOrStart(rec, verb) {
  const name = rec.ws.name;
  const gen = session.generation;
  rec.acting = true;
  updateRow(rec);
  show($("list-error"), false);
  api.call("POST", "workspaces/" + encodeURIComponent(name) + "/" + verb, {}).then(
    () => {
      if (gen !== session.generation) return;
      if (verb === "stop") {
        const s = streams.get(name);
        if (s) s.controller.abort();
        rec.live = { status: "stopping", at: Date.now() };
      } else {
        ended.delete(name);
        follow(name, "create");
      }
      refresh();
    },
    (e) => {
      if (gen !== session.generation || e.status === 401) return;
      showError("list-error", "Could not " + verb + " " + name + ": " + e.message);
    }
  ).then(() => {
    rec.acting = false;
    updateRow(rec);
  });
}

function deleteWorkspace(rec) {
  const name = rec.ws.name;
  const gen = session.generation;
  rec.deleteBtn.disabled = true;
  show($("list-error"), false);
  api.call("DELETE", "workspaces/" + encodeURIComponent(name)).then(
    () => {
      if (gen !== session.generation) return;
      rec.live = { status: "deleting", at: Date.now() };
      ended.delete(name);
      follow(name, "delete");
      refresh();
    },
    (e) => {
      if (gen !== session.generation || e.status === 401) return;
      if (e.status === 404) { // gone already: nothing to follow
        gone.add(name);
        removeRow(name);
        placeRows();
        refresh();
        return;
      }
      updateRow(rec);
      showError("list-error", "Could not delete " + name + ": " + e.message);
    }
  );
}
