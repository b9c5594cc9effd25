// A row's tokens cell: each container's token masked until "Show", with "Copy".
import { el, setText } from "./dom.js";
import { revealed } from "./state.js";

export function renderTokens(cell, name, tokens) {
  cell.replaceChildren();
  const containers = Object.keys(tokens).sort();
  if (!containers.length) {
    cell.append(el("span", { class: "muted", text: "—" }));
    return;
  }
  for (const container of containers) cell.append(token(name, container, String(tokens[container])));
}

function token(name, container, value) {
  const id = name + "/" + container;
  const code = el("code", { class: "token-value", "data-test": "token-value" });
  const showBtn = el("button", { type: "button", class: "btn btn-link btn-tiny", "data-test": "token-show" });
  const copyBtn = el("button", { type: "button", class: "btn btn-link btn-tiny", "data-test": "token-copy", text: "Copy" });
  function paint() {
    const open = revealed.has(id);
    setText(code, open ? value : "••••••••");
    code.classList.toggle("masked", !open);
    setText(showBtn, open ? "Hide" : "Show");
    showBtn.setAttribute("aria-pressed", open ? "true" : "false");
    showBtn.setAttribute("aria-label", (open ? "Hide" : "Show") + " the " + container + " token");
  }
  showBtn.addEventListener("click", () => {
    if (revealed.has(id)) revealed.delete(id);
    else revealed.add(id);
    paint();
  });
  copyBtn.setAttribute("aria-label", "Copy the " + container + " token");
  copyBtn.addEventListener("click", () => {
    copyText(value).then((ok) => {
      setText(copyBtn, ok ? "Copied" : "Copy failed");
      copyBtn.classList.toggle("copied", ok);
      setTimeout(() => { setText(copyBtn, "Copy"); copyBtn.classList.remove("copied"); }, 1500);
    });
  });
  paint();
  return el("div", { class: "token", "data-test": "token", "data-container": container }, [
    el("span", { class: "token-name", text: container }),
    code,
    showBtn,
    copyBtn,
  ]);
}

function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    return navigator.clipboard.writeText(text).then(() => true, () => legacyCopy(text));
  }
  return Promise.resolve(legacyCopy(text));
}

// Without the Clipboard API (plain http): select a hidden textarea and copy.
function legacyCopy(text) {
  const area = el("textarea", { readOnly: true, class: "offscreen" });
  area.value = text;
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand("copy");
  } catch (_) {
    ok = false;
  }
  area.remove();
  return ok;
}
