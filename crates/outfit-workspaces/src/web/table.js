// The rows of the workspace list in the DOM: each built once, then painted from what rows.js
// decides. What Stop, Start and Delete do is the list's (list.js), given to makeRow.
import { $, el, setText, show } from "./dom.js";
import { dateTime, statusClass } from "./format.js";
import { compareRows, limitsText, rowView, shownStatus } from "./rows.js";
import { makeSharing } from "./sharing.js";
import { renderTokens } from "./tokens.js";
import { session, touch } from "./session.js";
import { page, rows, streams } from "./state.js";

function button(test, text, style) {
  return el("button", { type: "button", class: "btn btn-small " + style, "data-test": test, text });
}

// The row's cells and buttons, kept in its record `rec` to paint later.
function buildRow(rec, name) {
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
  rec.deleteBtn = button("delete", "Delete", "btn-danger-outline");
  rec.confirmBtn = button("delete-confirm", "Yes, delete", "btn-danger");
  rec.cancelBtn = button("delete-cancel", "Cancel", "btn-ghost");
  rec.confirmBox = el("div", { class: "confirm", role: "group", "aria-label": "Confirm delete of " + name, hidden: true }, [
    rec.confirmBtn,
    rec.cancelBtn,
  ]);
  rec.stopBtn = button("stop", "Stop", "btn-ghost");
  rec.startBtn = el("button", { type: "button", class: "btn btn-small", "data-test": "start", text: "Start" });
  rec.shareBtn = button("share", "Share", "btn-ghost");
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
}

// A new row for workspace `name`; actions.stop, .start and .remove(rec) do what its buttons say.
export function makeRow(name, actions) {
  const rec = { confirming: false, tokensKey: null, urlKey: null };
  buildRow(rec, name);
  rec.shareBtn.addEventListener("click", () => rec.sharing.toggle());
  rec.stopBtn.addEventListener("click", () => actions.stop(rec));
  rec.startBtn.addEventListener("click", () => actions.start(rec));
  rec.deleteBtn.addEventListener("click", () => {
    rec.confirming = true;
    updateRow(rec);
    rec.confirmBtn.focus();
  });
  rec.cancelBtn.addEventListener("click", () => {
    rec.confirming = false;
    updateRow(rec);
    rec.deleteBtn.focus();
  });
  rec.confirmBtn.addEventListener("click", () => {
    rec.confirming = false;
    actions.remove(rec);
  });
  rec.sharing = makeSharing(name);
  rec.tr.querySelector(".ws-actions").append(rec.sharing.box);
  return rec;
}

// Paints the row of `rec` from its workspace (rec.ws) and its stream, if one runs.
export function updateRow(rec) {
  const ws = rec.ws;
  const stream = streams.get(ws.name) || null;
  const status = shownStatus(ws, rec.live, !!stream, Date.now());
  const view = rowView({
    ws,
    status,
    stream,
    confirming: rec.confirming,
    acting: rec.acting,
    proxy: session.me && session.me.proxy,
    clusterCount: page.clusters.length,
  });
  rec.confirming = view.confirming;
  if (rec.tr.dataset.status !== status) rec.tr.dataset.status = status;
  rec.badge.className = statusClass(status);
  setText(rec.badge, status);
  paintAbout(rec, ws, view);
  paintPhase(rec, view);
  paintUrls(rec, ws);
  const tokens = ws.tokens && typeof ws.tokens === "object" ? ws.tokens : {};
  const tokensKey = JSON.stringify(tokens);
  if (tokensKey !== rec.tokensKey) {
    rec.tokensKey = tokensKey;
    renderTokens(rec.tokensCell, ws.name, tokens);
  }
  paintActions(rec, view.actions);
}

// Under the name: its manifest, cluster and limits; the user, the age.
function paintAbout(rec, ws, view) {
  rec.nameMeta.title = ws.expires ? "Expires " + dateTime(ws.expires) : "";
  setText(rec.manifestMeta, ws.manifest || "");
  setText(rec.limitsMeta, limitsText(ws));
  setText(rec.clusterMeta, view.cluster);
  show(rec.clusterMeta, !!view.cluster);
  setText(rec.userCell, ws.user || "");
  setText(rec.ageCell, ws.age || "");
  rec.ageCell.title = ws.created ? "Created " + dateTime(ws.created) : "";
}

function paintPhase(rec, view) {
  setText(rec.phaseText, view.phase);
  show(rec.phaseText, !!view.phase);
  setText(rec.messageText, view.message);
  rec.messageText.classList.toggle("muted", view.muted);
  if (view.progress) {
    rec.miniFill.style.width = view.progress.percent + "%";
    setText(rec.miniLabel, view.progress.percent + "%");
    rec.mini.classList.toggle("mini-delete", view.progress.deleting);
  }
  show(rec.mini, !!view.progress);
}

// The workspace's URL (opening it records activity) and ssh URL, rebuilt only when they change.
function paintUrls(rec, ws) {
  const urlKey = (ws.url || "") + "\n" + (ws.sshUrl || "");
  if (urlKey === rec.urlKey) return;
  rec.urlKey = urlKey;
  rec.urlCell.replaceChildren();
  if (ws.url) {
    const a = el("a", { href: ws.url, target: "_blank", rel: "noopener noreferrer", class: "ws-link", "data-test": "workspace-url", title: ws.url }, [
      el("span", { class: "ws-link-text", text: ws.url.replace(/^https?:\/\//, "") }),
      el("span", { class: "ext", "aria-hidden": "true", text: "↗" }),
    ]);
    a.addEventListener("click", () => touch(ws.name));
    rec.urlCell.append(a);
  }
  if (ws.sshUrl) rec.urlCell.append(el("div", { class: "ws-ssh" }, [el("code", { text: ws.sshUrl })]));
  if (!ws.url && !ws.sshUrl) rec.urlCell.append(el("span", { class: "muted", text: "—" }));
}

function paintActions(rec, actions) {
  rec.deleteBtn.disabled = actions.delete.disabled;
  setText(rec.deleteBtn, actions.delete.label);
  show(rec.deleteBtn, actions.delete.shown);
  show(rec.confirmBox, actions.confirm);
  show(rec.stopBtn, actions.stop.shown);
  rec.stopBtn.disabled = actions.stop.disabled;
  setText(rec.stopBtn, actions.stop.label);
  show(rec.startBtn, actions.start.shown);
  rec.startBtn.disabled = actions.start.disabled;
  // Sharing is the workspace proxy's (proxyDomain), for workspaces of the native API.
  show(rec.shareBtn, actions.share);
}

export function removeRow(name) {
  const rec = rows.get(name);
  if (!rec) return;
  rec.tr.remove();
  rows.delete(name);
}

// Puts the rows in the list's order (moving nodes only when it changed) and shows the empty
// note or the table.
export function placeRows() {
  const tbody = $("workspace-rows");
  const recs = Array.from(rows.values()).sort((a, b) => compareRows(a.ws, b.ws));
  const current = Array.from(tbody.children);
  const inOrder = current.length === recs.length && recs.every((r, i) => current[i] === r.tr);
  if (!inOrder) recs.forEach((r) => tbody.append(r.tr));
  show($("list-empty"), recs.length === 0);
  show($("table-wrap"), recs.length > 0);
  document.querySelectorAll(".col-user").forEach((node) => show(node, page.showAll));
}
