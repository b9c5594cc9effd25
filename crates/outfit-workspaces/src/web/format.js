// How the page writes times, names and percents. Pure: node's tests import it.

export function capitalise(s) {
  s = String(s || "");
  return s.charAt(0).toUpperCase() + s.slice(1);
}

// A time of day with seconds (a step's time), or "" for none.
export function clock(at) {
  if (!at) return "";
  const d = new Date(at);
  return isNaN(d) ? "" : d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

// A time of day when it is within the next day, else a short date and time.
export function shortTime(at, now = Date.now()) {
  const d = new Date(at);
  if (isNaN(d)) return String(at);
  const ahead = d.getTime() - now;
  if (ahead > -3600e3 && ahead < 20 * 3600e3) return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  return d.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

export function dateTime(at) {
  if (!at) return "";
  const d = new Date(at);
  return isNaN(d) ? String(at) : d.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
}

// A whole percent from 0 to 100, whatever the server sent.
export function clampPercent(v) {
  const n = Math.round(Number(v));
  if (!isFinite(n)) return 0;
  return Math.max(0, Math.min(100, n));
}

// The class of a status badge: letters only, so a status can't inject a class.
export function statusClass(status) {
  return "badge status status-" + String(status).replace(/[^a-z]/g, "");
}
