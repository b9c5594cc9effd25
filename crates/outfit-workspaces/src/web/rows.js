// What a row of the workspace list shows and offers, decided from plain data: the workspace as
// the list gave it, what its progress stream said last, and what the user is doing in the row.
// Pure: the DOM rows (table.js) only apply what these functions answer, and node's tests call
// them for every status the API has.
import { capitalise, clampPercent, shortTime } from "./format.js";

// What the list says can lag behind the progress stream: for a while after the stream said
// `live`, a listed status in STALE[live] is older news and the row shows `live`.
export const STALE = {
  ready: ["creating"],
  failed: ["creating"],
  deleting: ["creating", "ready", "failed", "stopping", "stopped"],
  creating: ["stopped"],
  deleted: ["creating", "ready", "failed", "deleting", "stopping", "stopped"],
  stopping: ["creating", "ready", "failed"],
  stopped: ["creating", "ready", "failed", "stopping"],
};
export const LIVE_TRUSTED_MS = 15000;
// A stream that ended is not followed again for this long on what a lagging list says.
export const ENDED_TRUSTED_MS = 30000;

// The status the row shows. live: {status, at} from the stream, or null; streaming: whether a
// stream still runs.
export function shownStatus(ws, live, streaming, now) {
  const listed = ws.status || "unknown";
  if (!live) return listed;
  const fresh = streaming || now - live.at < LIVE_TRUSTED_MS;
  if (fresh && (STALE[live.status] || []).includes(listed)) return live.status;
  return listed;
}

// Where the workspace runs, said only when there is a choice (or its cluster is away).
export function clusterNote(cluster, clusterCount) {
  const c = cluster || {};
  const several = clusterCount > 1 || c.reachable === false;
  if (!several || !c.name) return "";
  return "on " + c.name + (c.reachable === false ? " (unreachable)" : "");
}

export function limitsText(ws, now = Date.now()) {
  const limits = [];
  if (ws.expires) limits.push("expires " + shortTime(ws.expires, now));
  if (ws.idleTimeout) limits.push("idle " + ws.idleTimeout);
  return limits.join(" · ");
}

// Phase and message: live from the stream while one runs, else from the list.
function phaseAndMessage(ws, status, last) {
  let phase = last ? last.phase : ws.phase;
  const message = last ? last.message : ws.message;
  if (status === "ready" && !last) phase = null;
  return {
    phase: phase ? capitalise(phase) : "",
    message: message || (phase ? "" : status === "ready" ? "Running" : "—"),
    muted: !message,
  };
}

// Which buttons the row shows, enabled or not, and their labels. A delete under way offers
// nothing more; a stopped workspace offers Start; a running one Stop.
function actionsFor(status, { deleting, confirming, acting, proxy }) {
  const free = !deleting && !confirming;
  const stoppable = free && (status === "ready" || status === "creating" || status === "failed");
  return {
    delete: { shown: !confirming, disabled: deleting, label: deleting ? "Deleting…" : "Delete" },
    confirm: confirming,
    stop: {
      shown: stoppable || status === "stopping",
      disabled: status === "stopping" || acting,
      label: status === "stopping" ? "Stopping…" : "Stop",
    },
    start: { shown: free && status === "stopped", disabled: acting },
    share: proxy && free && status !== "deleted",
  };
}

// Everything the row shows. stream: {kind, last} while a stream runs, else null; confirming:
// the delete's confirmation is open; acting: a stop or start is under way; proxy: the backend
// shares workspaces; clusterCount: how many clusters a launch may go to.
export function rowView({ ws, status, stream, confirming, acting, proxy, clusterCount }) {
  const deleting = status === "deleting" || (!!stream && stream.kind === "delete");
  const open = !!confirming && !deleting; // a delete under way closes the confirmation
  const last = stream ? stream.last : null;
  return {
    status,
    ...phaseAndMessage(ws, status, last),
    progress: stream ? { percent: last ? clampPercent(last.percent) : 0, deleting: stream.kind === "delete" } : null,
    cluster: clusterNote(ws.cluster, clusterCount),
    confirming: open,
    actions: actionsFor(status, { deleting, confirming: open, acting: !!acting, proxy: !!proxy }),
  };
}

// The list's order: newest first, then by name.
export function compareRows(a, b) {
  const ca = a.created || "", cb = b.created || "";
  if (ca !== cb) return ca < cb ? 1 : -1;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

// Whether a row stays after a refresh: listed and not deleted here, or just created (the list
// may not show it yet) while its create is followed.
export function keepsRow(name, listed, gone, stream) {
  if (gone.has(name)) return false;
  return listed.has(name) || (!!stream && stream.kind === "create");
}

// Which stream to follow for a listed workspace: "create", "delete" or null. Only the user's own
// creates and deletes under way, and not one whose stream just ended while the list lags.
// ended: {status, at} of its last stream, or undefined.
export function followKind(ws, { me, streaming, ended, now }) {
  if (streaming) return null;
  if (me && ws.user && me.user && ws.user !== me.user) return null;
  if (ws.status !== "creating" && ws.status !== "deleting") return null;
  if (ended && now - ended.at < ENDED_TRUSTED_MS) {
    if (ended.status === "lost") return null;
    if (ws.status === "creating" && ["ready", "failed", "deleted"].includes(ended.status)) return null;
    if (ws.status === "deleting" && ended.status === "deleted") return null;
  }
  return ws.status === "creating" ? "create" : "delete";
}
