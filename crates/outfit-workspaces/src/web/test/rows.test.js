// What a row shows and offers, for every status the API answers.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { compareRows, followKind, keepsRow, rowView, shownStatus } from "../rows.js";

// The statuses the API has: the model's `Status::as_str` and the native API's docs (docs/workspaces/native-api.md).
function statusesOfTheApi() {
  const model = readFileSync(new URL("../../../../outfit-workspaces-core/src/workspace/progress/types.rs", import.meta.url), "utf8");
  const asStr = model.slice(model.indexOf("pub fn as_str"));
  const fromModel = [...asStr.slice(0, asStr.indexOf("\n    }\n")).matchAll(/=> "([a-z]+)"/g)].map((m) => m[1]);
  const docs = readFileSync(new URL("../../../../../docs/workspaces/native-api.md", import.meta.url), "utf8");
  const row = docs.split("\n").find((line) => line.startsWith("| `status` | `creating`"));
  const fromDocs = [...row.matchAll(/`([a-z]+)`/g)].map((m) => m[1]).filter((s) => s !== "status");
  return { fromModel: fromModel.sort(), fromDocs: [...new Set(fromDocs)].sort() };
}

// For each status, with no stream and the workspace proxy on: [Stop, Start, Delete, Share],
// each "-" hidden, "off" shown disabled, else its label.
const ACTIONS = {
  creating: ["Stop", "-", "Delete", "Share"],
  ready: ["Stop", "-", "Delete", "Share"],
  failed: ["Stop", "-", "Delete", "Share"],
  deleting: ["-", "-", "off Deleting…", "-"],
  deleted: ["-", "-", "Delete", "-"],
  unknown: ["-", "-", "Delete", "Share"],
  stopping: ["off Stopping…", "-", "Delete", "Share"],
  stopped: ["-", "Start", "Delete", "Share"],
};

function buttons(view) {
  const a = view.actions;
  const one = (b, label) => (!b.shown ? "-" : b.disabled ? "off " + label : label);
  return [one(a.stop, a.stop.label), one(a.start, "Start"), one(a.delete, a.delete.label), a.share ? "Share" : "-"];
}

function view(status, more = {}) {
  return rowView({ ws: { name: "w", status }, status, stream: null, confirming: false, acting: false, proxy: true, clusterCount: 1, ...more });
}

test("the page decides a row for every status of the model and of the docs", () => {
  const { fromModel, fromDocs } = statusesOfTheApi();
  assert.deepEqual(fromModel, Object.keys(ACTIONS).sort());
  assert.deepEqual(fromDocs, Object.keys(ACTIONS).sort());
});

test("each status offers its actions", () => {
  for (const [status, expected] of Object.entries(ACTIONS)) {
    assert.deepEqual(buttons(view(status)), expected, status);
  }
});

test("no Share without the workspace proxy; a stop or start under way disables both", () => {
  assert.equal(view("ready", { proxy: false }).actions.share, false);
  assert.deepEqual(buttons(view("ready", { acting: true })), ["off Stop", "-", "Delete", "Share"]);
  assert.deepEqual(buttons(view("stopped", { acting: true })), ["-", "off Start", "Delete", "Share"]);
});

test("the delete's confirmation hides Delete, Stop, Start and Share", () => {
  for (const status of ["ready", "stopped"]) {
    const v = view(status, { confirming: true });
    assert.equal(v.confirming, true);
    assert.equal(v.actions.confirm, true);
    assert.deepEqual(buttons(v), ["-", "-", "-", "-"], status);
  }
});

test("a delete followed closes the confirmation and disables Delete, whatever the list says", () => {
  const v = view("ready", { confirming: true, stream: { kind: "delete", last: null } });
  assert.equal(v.confirming, false);
  assert.deepEqual(buttons(v), ["-", "-", "off Deleting…", "-"]);
  assert.deepEqual(v.progress, { percent: 0, deleting: true });
});

test("phase and message come from the stream while one runs, else from the list", () => {
  const ws = { name: "w", status: "creating", phase: "storage", message: "claim c is Pending" };
  let v = rowView({ ws, status: "creating", stream: null, proxy: false, clusterCount: 1 });
  assert.deepEqual([v.phase, v.message, v.muted, v.progress], ["Storage", "claim c is Pending", false, null]);
  const last = { phase: "image pull", message: "Pulling", percent: 140 };
  v = rowView({ ws, status: "creating", stream: { kind: "create", last }, proxy: false, clusterCount: 1 });
  assert.deepEqual([v.phase, v.message, v.progress], ["Image pull", "Pulling", { percent: 100, deleting: false }]);
});

test("a ready row says Running, with no phase, when the list has no message", () => {
  const ready = rowView({ ws: { name: "w", status: "ready", phase: "services" }, status: "ready", stream: null, clusterCount: 1 });
  assert.deepEqual([ready.phase, ready.message, ready.muted], ["", "Running", true]);
  const stopped = view("stopped");
  assert.deepEqual([stopped.phase, stopped.message], ["", "—"]);
});

test("the cluster is named only when there is a choice, or it is away", () => {
  const on = (cluster, clusterCount) => rowView({ ws: { name: "w", cluster }, status: "ready", stream: null, clusterCount }).cluster;
  assert.equal(on({ name: "east", reachable: true }, 1), "");
  assert.equal(on({ name: "east", reachable: true }, 2), "on east");
  assert.equal(on({ name: "east", reachable: false }, 1), "on east (unreachable)");
});

test("the stream's news wins over a lagging list for 15 s, or while it runs", () => {
  const ws = { name: "w", status: "creating" };
  const live = { status: "ready", at: 1000 };
  assert.equal(shownStatus(ws, live, false, 1000 + 14999), "ready");
  assert.equal(shownStatus(ws, live, false, 1000 + 15000), "creating");
  assert.equal(shownStatus(ws, live, true, 1000 + 60000), "ready");
  // News the list can't be behind on: the list wins.
  assert.equal(shownStatus({ name: "w", status: "deleting" }, live, true, 1000), "deleting");
  assert.equal(shownStatus({ name: "w" }, null, false, 0), "unknown");
});

test("creates and deletes under way are followed, the user's own only, not twice", () => {
  const me = { user: "alice" };
  const ask = (ws, more = {}) => followKind({ name: "w", user: "alice", ...ws }, { me, streaming: false, ended: undefined, now: 100000, ...more });
  assert.equal(ask({ status: "creating" }), "create");
  assert.equal(ask({ status: "deleting" }), "delete");
  assert.equal(ask({ status: "ready" }), null);
  assert.equal(ask({ status: "creating", user: "bob" }), null);
  assert.equal(ask({ status: "creating" }, { streaming: true }), null);
  assert.equal(ask({ status: "creating" }, { ended: { status: "ready", at: 80000 } }), null);
  assert.equal(ask({ status: "creating" }, { ended: { status: "ready", at: 60000 } }), "create");
  assert.equal(ask({ status: "deleting" }, { ended: { status: "ready", at: 80000 } }), "delete");
  assert.equal(ask({ status: "deleting" }, { ended: { status: "lost", at: 80000 } }), null);
});

test("a row stays while listed, or while its create is followed, unless deleted here", () => {
  const listed = new Set(["a"]);
  assert.equal(keepsRow("a", listed, new Set(), undefined), true);
  assert.equal(keepsRow("a", listed, new Set(["a"]), undefined), false);
  assert.equal(keepsRow("b", listed, new Set(), { kind: "create" }), true);
  assert.equal(keepsRow("b", listed, new Set(), { kind: "delete" }), false);
  assert.equal(keepsRow("b", listed, new Set(["b"]), { kind: "create" }), false);
});

test("rows are listed newest first, then by name", () => {
  const ws = [
    { name: "b", created: "2026-01-01T10:00:00Z" },
    { name: "c", created: "2026-01-02T10:00:00Z" },
    { name: "a", created: "2026-01-01T10:00:00Z" },
    { name: "d" },
  ];
  assert.deepEqual(ws.sort(compareRows).map((w) => w.name), ["c", "a", "b", "d"]);
});
