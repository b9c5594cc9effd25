// The progress cards: one for each create or delete followed, with its percent, its steps and
// its outcome. A card only shows what it is told (progress.js feeds it the stream's reports).
import { el, setText, show } from "./dom.js";
import { capitalise, clampPercent, clock, statusClass } from "./format.js";

// The steps a card lists before the first report, in the server's order (docs/workspaces.md,
// "Live progress").
export const STEP_ORDER = {
  create: ["storage", "scheduling", "image pull", "containers", "readiness", "services"],
  delete: ["stopping", "gone"],
};

// One step's line: an icon, its name, state, message and time.
function stepItem(key) {
  const item = {
    icon: el("span", { class: "step-icon", "aria-hidden": "true" }),
    name: el("span", { class: "step-name", text: capitalise(key) }),
    stateText: el("span", { class: "sr-only" }),
    message: el("span", { class: "step-message" }),
    at: el("time", { class: "step-at" }),
  };
  item.li = el("li", { class: "step", "data-test": "progress-step", "data-step": key }, [
    item.icon,
    el("div", { class: "step-body" }, [item.name, item.stateText, item.message, item.at]),
  ]);
  return item;
}

function paintStep(item, step) {
  const state = String(step.state || "pending").replace(/[^a-z]/g, "");
  item.li.dataset.state = state;
  item.li.className = "step step-" + state;
  setText(item.stateText, " (" + state + ")");
  setText(item.message, step.message || "");
  show(item.message, !!step.message);
  setText(item.at, clock(step.at));
  if (step.at) item.at.setAttribute("datetime", step.at);
  if (state === "active") item.li.setAttribute("aria-current", "step");
  else item.li.removeAttribute("aria-current");
}

// What a finished card says: its link when ready, the reason when failed.
function outcome(box, event, p) {
  if (event === "ready") {
    const link = el("span", { class: "pc-link" });
    box.append(el("strong", { text: "Ready." }), " ", link);
    return link;
  }
  if (event === "failed") {
    box.append(el("strong", { text: "The workspace did not start." }));
    box.append(el("p", { text: p.message || "No reason was given." }));
    if (p.warning) box.append(el("p", { class: "pc-failed-warning", text: "Cluster warning: " + p.warning }));
  } else {
    box.append(el("strong", { text: "Deleted." }), " ", "The workspace and its resources are gone.");
  }
  return null;
}

export class ProgressCard {
  // onDismiss(): the user closed it; onOpen(): the user opened the workspace from it.
  constructor(name, { onDismiss, onOpen }) {
    this.name = name;
    this.url = "";
    this.link = null;
    this.onOpen = onOpen;
    this.stepItems = new Map();
    this.build(name);
    this.dismiss.addEventListener("click", () => {
      this.root.remove();
      onDismiss();
    });
  }

  build(name) {
    this.kindLabel = el("span", { class: "pc-kind" });
    this.pill = el("span", { class: "badge status" });
    this.dismiss = el("button", { type: "button", class: "btn btn-ghost btn-icon", "aria-label": "Dismiss", title: "Dismiss", text: "×", hidden: true });
    this.fill = el("div", { class: "bar-fill" });
    this.bar = el("div", { class: "bar", "data-test": "progress-bar", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": "0", "aria-label": "Progress of " + name }, [this.fill]);
    this.percent = el("span", { class: "pc-percent", text: "0%" });
    this.phase = el("span", { class: "pc-phase" });
    this.message = el("span", { class: "pc-message" });
    this.now = el("p", { class: "pc-now" }, [this.phase, this.message]);
    this.steps = el("ol", { class: "steps" });
    this.note = el("p", { class: "pc-note", hidden: true });
    this.warning = el("p", { class: "pc-warning", "data-test": "progress-warning", hidden: true });
    this.outcome = el("div", { class: "pc-outcome", "data-test": "progress-outcome", hidden: true });
    const title = el("h3", { class: "pc-title" }, [el("span", { class: "pc-name", text: name })]);
    this.root = el("article", { class: "progress-card", "data-test": "progress", "data-workspace": name, "data-status": "" }, [
      el("div", { class: "pc-head" }, [
        el("div", { class: "pc-heading" }, [title, this.kindLabel]),
        el("div", { class: "pc-tools" }, [this.pill, this.dismiss]),
      ]),
      el("div", { class: "pc-barline" }, [this.bar, this.percent]),
      this.now,
      this.steps,
      this.warning,
      this.note,
      this.outcome,
    ]);
  }

  // Back to the start of a create or a delete, every step pending.
  reset(kind) {
    this.kind = kind;
    this.root.dataset.kind = kind;
    this.root.dataset.status = "";
    delete this.root.dataset.percent;
    this.root.className = "progress-card live kind-" + kind;
    setText(this.kindLabel, kind === "create" ? "Creating" : "Deleting");
    this.setPill(kind === "create" ? "creating" : "deleting");
    this.setPercent(0);
    setText(this.phase, "");
    show(this.phase, false);
    setText(this.message, kind === "create" ? "Waiting for the first update…" : "Waiting for the delete to start…");
    this.now.classList.remove("both");
    show(this.now, true);
    this.steps.replaceChildren();
    this.stepItems = new Map();
    for (const step of STEP_ORDER[kind] || []) this.step({ name: step, state: "pending" });
    for (const node of [this.warning, this.note, this.outcome, this.dismiss]) show(node, false);
  }

  setPill(status) {
    this.pill.className = statusClass(status);
    setText(this.pill, status);
  }

  setPercent(pct) {
    this.fill.style.width = pct + "%";
    this.bar.setAttribute("aria-valuenow", String(pct));
    setText(this.percent, pct + "%");
  }

  step(step) {
    const key = String(step.name || "");
    let item = this.stepItems.get(key);
    if (!item) {
      item = stepItem(key);
      this.stepItems.set(key, item);
      this.steps.append(item.li);
    }
    paintStep(item, step);
  }

  // A report `p` of the stream, whose status is `status`.
  update(p, status) {
    const pct = clampPercent(p.percent);
    this.root.dataset.status = status;
    this.root.dataset.percent = String(pct);
    this.setPill(status);
    this.setPercent(pct);
    setText(this.phase, p.phase ? capitalise(p.phase) : "");
    show(this.phase, !!p.phase);
    setText(this.message, p.message || "");
    this.now.classList.toggle("both", !!(p.phase && p.message));
    show(this.now, !!(p.phase || p.message));
    if (Array.isArray(p.steps)) this.updateSteps(p.steps);
    setText(this.warning, p.warning ? "Cluster warning: " + p.warning : "");
    show(this.warning, !!p.warning && status !== "failed");
  }

  // The server's steps, in its order; steps it does not report (the other kind's) are dropped.
  updateSteps(steps) {
    const seen = new Set();
    for (const step of steps) {
      if (!step || !step.name) continue;
      seen.add(String(step.name));
      this.step(step);
    }
    if (!steps.length) return;
    for (const [key, item] of this.stepItems) {
      if (!seen.has(key)) {
        item.li.remove();
        this.stepItems.delete(key);
      }
    }
    for (const step of steps) {
      const item = step && this.stepItems.get(String(step.name));
      if (item) this.steps.append(item.li);
    }
  }

  // The final event: `ready`, `failed` or `deleted`. url: the workspace's, if the card has none.
  finish(event, p, url) {
    this.root.classList.remove("live");
    this.root.classList.add("done-" + event);
    show(this.dismiss, true);
    show(this.note, false);
    if (event === "ready") this.setPercent(100);
    const box = this.outcome;
    box.replaceChildren();
    box.className = "pc-outcome outcome-" + event;
    box.setAttribute("role", event === "failed" ? "alert" : "status");
    this.link = outcome(box, event, p) || this.link;
    if (event === "ready") this.setUrl(this.url || url);
    show(box, true);
    setText(this.kindLabel, event === "ready" ? "Created" : event === "failed" ? "Create failed" : "Deleted");
  }

  setUrl(url) {
    this.url = url || "";
    if (!this.link || !this.link.isConnected) return;
    this.link.replaceChildren();
    if (this.url) {
      const a = el("a", { href: this.url, target: "_blank", rel: "noopener noreferrer", text: "Open the workspace ↗" });
      a.addEventListener("click", () => this.onOpen());
      this.link.append(a);
    } else {
      this.link.append("It is listed below.");
    }
  }

  // Shows a problem with the stream under the steps, or hides it when empty.
  problem(message) {
    setText(this.note, message || "");
    show(this.note, !!message);
  }
}
