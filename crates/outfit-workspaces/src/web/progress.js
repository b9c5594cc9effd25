// Live progress: a create's or delete's event stream followed into its card and its row. The
// list (list.js) starts following what is under way, and is read again when a stream ends: it
// says how with `whenStreamEnds`, so that the two modules don't import each other.
import { errorFrom } from "./api.js";
import { ProgressCard } from "./cards.js";
import { $, show } from "./dom.js";
import { api, endSession, session, touch } from "./session.js";
import { keepReading } from "./sse.js";
import { cards, ended, gone, rows, streams } from "./state.js";
import { placeRows, removeRow, updateRow } from "./table.js";

const MAX_CARDS = 6;

// What the page does when a stream ends (reads the list again: app.js sets it).
let streamEnded = () => {};

export function whenStreamEnds(fn) {
  streamEnded = fn;
}
const FINAL = new Set(["ready", "failed", "deleted"]);

// Follows workspace `name`'s "create" or "delete" from now on, in place of any stream before.
export function follow(name, kind) {
  const old = streams.get(name);
  if (old) old.controller.abort();
  const card = cardFor(name);
  card.reset(kind);
  const s = { name, kind, controller: new AbortController(), last: null, done: false, gen: session.generation };
  streams.set(name, s);
  const rec = rows.get(name);
  if (rec) {
    rec.live = { status: kind === "create" ? "creating" : "deleting", at: Date.now() };
    updateRow(rec);
  }
  runStream(s, card);
}

// Stops every stream and drops every card (sign-out).
export function stopFollowing() {
  streams.forEach((s) => s.controller.abort());
  streams.clear();
  cards.forEach((card) => card.root.remove());
  cards.clear();
  ended.clear();
  updateActivityEmpty();
}

function endStream(s, status) {
  s.done = true;
  if (streams.get(s.name) === s) streams.delete(s.name);
  ended.set(s.name, { status, at: Date.now() });
  const rec = rows.get(s.name);
  if (rec) updateRow(rec);
}

function runStream(s, card) {
  const signal = s.controller.signal;
  return keepReading({
    connect: (lastEventId) => connect(s, card, lastEventId),
    onEvent: ({ event, data }) => {
      let p;
      try { p = JSON.parse(data); } catch (_) { return true; }
      if (!p || typeof p !== "object") return true;
      return onEvent(s, card, event, p);
    },
    onConnected: () => card.problem(""),
    onRetry: (e) => card.problem("Reconnecting to the progress stream (" + (e && e.message) + ")…"),
    onGiveUp: (e) => {
      card.problem("Lost the progress stream (" + (e && e.message) + "). The list below still updates.");
      endStream(s, "lost");
    },
    signal,
  });
}

// The stream's body, or null when its answer ends the following here: the session is over, or
// the workspace is gone or not the user's.
async function connect(s, card, lastEventId) {
  const res = await api.stream("workspaces/" + encodeURIComponent(s.name) + "/progress", s.controller.signal, lastEventId);
  if (res.ok) {
    if (!res.body || !res.body.getReader) throw new Error("this browser can't read a response as a stream");
    return res.body;
  }
  const err = errorFrom(res, await res.text());
  if (res.status === 401) {
    if (s.gen === session.generation) endSession(err);
    endStream(s, "lost");
    return null;
  }
  if (res.status === 404 && s.kind === "delete") {
    // Already gone before we could watch it go.
    const p = { workspace: s.name, status: "deleted", percent: 100, phase: null, message: "Deleted.", steps: [], warning: null };
    onEvent(s, card, "deleted", p);
    return null;
  }
  if (res.status === 404 || res.status === 403) {
    card.problem(err.message);
    endStream(s, "lost");
    return null;
  }
  throw err;
}

// A report `p` in an event named `event`; false once the stream is over.
function onEvent(s, card, event, p) {
  if (s.done || s.gen !== session.generation) return false;
  const final = FINAL.has(event);
  if (!final && event !== "progress" && event !== "message") return true;
  s.last = p;
  const status = final ? event : String(p.status || "");
  card.update(p, status);
  const rec = rows.get(s.name);
  if (rec) {
    rec.live = { status, at: Date.now() };
    updateRow(rec);
  }
  if (!final) return true;
  card.finish(event, p, rec && rec.ws.url);
  endStream(s, event);
  if (event === "deleted") {
    gone.add(s.name);
    removeRow(s.name);
    placeRows();
  }
  streamEnded();
  return false;
}

export function updateActivityEmpty() {
  show($("activity-empty"), cards.size === 0);
}

// The card of `name`, new or not, at the top of the panel; the oldest finished cards beyond
// MAX_CARDS go.
function cardFor(name) {
  const activity = $("activity");
  let card = cards.get(name);
  if (card) {
    activity.insertBefore(card.root, $("activity-empty").nextSibling);
    return card;
  }
  card = new ProgressCard(name, {
    onDismiss: () => {
      cards.delete(name);
      updateActivityEmpty();
    },
    onOpen: () => touch(name),
  });
  cards.set(name, card);
  activity.insertBefore(card.root, $("activity-empty").nextSibling);
  const shown = Array.from(activity.querySelectorAll(".progress-card")).map((n) => n.dataset.workspace);
  for (let i = shown.length - 1; i >= 0 && cards.size > MAX_CARDS; i--) {
    if (!streams.has(shown[i]) && shown[i] !== name) {
      cards.get(shown[i]).root.remove();
      cards.delete(shown[i]);
    }
  }
  updateActivityEmpty();
  return card;
}
