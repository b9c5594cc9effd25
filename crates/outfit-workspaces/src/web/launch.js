// "New workspace": the catalogue's entries, the chosen entry's settings and cluster, and the
// launch, whose answer's warnings or error are shown under the form.
import { $, el, setText, show, showError } from "./dom.js";
import { refresh, upsertRow } from "./list.js";
import { follow } from "./progress.js";
import { api, session } from "./session.js";
import { ended, gone, page } from "./state.js";
import { placeRows } from "./table.js";

export function loadCatalogue() {
  const gen = session.generation;
  api.call("GET", "catalogue").then(
    (data) => {
      if (gen !== session.generation) return;
      page.catalogue = (data && Array.isArray(data.items) ? data.items : []).filter((e) => e && e.name);
      page.clusters = (data && Array.isArray(data.clusters) ? data.clusters : []).filter((c) => c && c.name);
      renderCatalogue();
    },
    (e) => {
      if (gen !== session.generation || e.status === 401) return;
      page.catalogue = [];
      renderCatalogue();
      formError("Could not load the catalogue: " + e.message);
    }
  );
}

function renderCatalogue() {
  const select = $("catalogue-select");
  const previous = select.value;
  select.replaceChildren();
  if (!page.catalogue.length) {
    select.append(el("option", { value: "", text: "No workspace types are available" }));
    select.disabled = true;
  } else {
    select.disabled = false;
    for (const entry of page.catalogue) {
      select.append(el("option", {
        value: entry.name,
        text: (entry.title || entry.name) + (entry.error ? " (unavailable)" : ""),
        disabled: !!entry.error,
      }));
    }
    const keep = page.catalogue.some((e) => e.name === previous && !e.error);
    const firstGood = page.catalogue.find((e) => !e.error);
    select.value = keep ? previous : (firstGood || page.catalogue[0]).name;
  }
  renderEntry();
}

function currentEntry() {
  const name = $("catalogue-select").value;
  return page.catalogue.find((e) => e.name === name) || null;
}

// The chosen entry's description, why it can't be launched, and its settings.
export function renderEntry() {
  const entry = currentEntry();
  setText($("entry-description"), entry ? entry.description || "" : "");
  show($("entry-description"), !!(entry && entry.description));
  showError("entry-error", entry && entry.error ? "This workspace type can't be launched: " + entry.error : "");
  const fields = entry && !entry.error && Array.isArray(entry.fields) ? entry.fields : [];
  $("fields-list").replaceChildren(...fields.map(fieldInput));
  show($("fields"), fields.length > 0);
  renderClusters(entry);
  updateLaunchButton();
}

// One env var of the manifest, filled with the manifest's value.
function fieldInput(field, i) {
  const id = "field-" + i;
  const def = field["default"] === null || field["default"] === undefined ? "" : String(field["default"]);
  const input = el("input", {
    type: "text",
    id,
    "data-test": "field-" + field.container + "-" + field.name,
    "data-container": field.container,
    "data-name": field.name,
    spellcheck: false,
    autocomplete: "off",
    placeholder: def === "" ? "(empty by default)" : "",
  });
  input.value = def;
  return el("div", { class: "field" }, [
    el("label", { for: id }, [
      el("span", { class: "field-container", text: field.container }),
      el("span", { class: "field-sep", text: " / " }),
      el("span", { class: "field-name", text: field.name }),
    ]),
    input,
  ]);
}

// With more than one cluster, the user picks where; an entry that names its cluster fixes it.
function renderClusters(entry) {
  const select = $("cluster-select");
  const previous = select.value;
  select.replaceChildren();
  for (const c of page.clusters) {
    select.append(el("option", {
      value: c.name,
      text: c.name + (c.reachable === false ? " (unreachable)" : ""),
      disabled: c.reachable === false,
    }));
  }
  const fixed = entry && entry.cluster;
  const keep = page.clusters.some((c) => c.name === previous && c.reachable !== false);
  if (fixed) select.value = fixed;
  else if (keep) select.value = previous;
  else if (page.clusters.length) select.value = page.clusters[0].name;
  select.disabled = !!fixed;
  show($("cluster-choice"), page.clusters.length > 1);
}

function updateLaunchButton() {
  const entry = currentEntry();
  $("launch").disabled = !entry || !!entry.error || $("launch-form").dataset.busy === "true";
}

// The launch's error (the API's message) under the form, or none.
export function formError(message) {
  showError("form-error", message);
}

export function formWarnings(warnings) {
  const box = $("form-warnings");
  box.replaceChildren();
  if (warnings && warnings.length) {
    box.append(el("p", { class: "warnings-title", text: "Launched, with warnings:" }));
    box.append(el("ul", null, warnings.map((w) => el("li", { text: String(w) }))));
  }
  show(box, !!(warnings && warnings.length));
}

// {container: {VAR: value}} from the form's inputs.
function settings() {
  const all = {};
  for (const input of $("fields-list").querySelectorAll("input[data-container]")) {
    const c = input.dataset.container;
    (all[c] = all[c] || {})[input.dataset.name] = input.value;
  }
  return all;
}

export function launch(ev) {
  ev.preventDefault();
  const form = $("launch-form");
  const entry = currentEntry();
  if (!entry || entry.error || form.dataset.busy === "true") return;
  formError("");
  formWarnings(null);
  const request = { manifest: entry.name, settings: settings() };
  if (page.clusters.length > 1 && !entry.cluster) request.cluster = $("cluster-select").value;
  form.dataset.busy = "true";
  const button = $("launch");
  button.disabled = true;
  setText(button, "Launching…");
  const gen = session.generation;
  api.call("POST", "workspaces", request)
    .then(
      (ws) => {
        if (gen !== session.generation || !ws || !ws.name) return;
        gone.delete(ws.name);
        ended.delete(ws.name);
        formWarnings(Array.isArray(ws.warnings) ? ws.warnings : null);
        upsertRow(ws);
        placeRows();
        follow(ws.name, "create");
        page.launchSeq++;
        form.dataset.launched = ws.name;
        form.dataset.launchSeq = String(page.launchSeq);
        refresh();
      },
      (e) => {
        if (gen !== session.generation || e.status === 401) return;
        formError(e.message);
      }
    )
    .then(() => {
      form.dataset.busy = "false";
      setText(button, "Launch");
      updateLaunchButton();
    });
}
