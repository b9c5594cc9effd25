// A row's sharing box: who may open the workspace through the workspace proxy (the backend's
// proxyDomain), read and saved through the API.
import { el, setText, show } from "./dom.js";
import { api } from "./session.js";

// "a, b,, c" -> ["a", "b", "c"]
function names(text) {
  return text.split(",").map((n) => n.trim()).filter((n) => n);
}

export function makeSharing(name) {
  const path = "workspaces/" + encodeURIComponent(name) + "/sharing";
  const level = el("select", { "data-test": "share-level", "aria-label": "Who may open " + name }, [
    el("option", { value: "owner", text: "Only me, and those named" }),
    el("option", { value: "authenticated", text: "Everyone signed in" }),
    el("option", { value: "public", text: "Anyone with the link" }),
  ]);
  const users = el("input", { type: "text", "data-test": "share-users", placeholder: "users, comma-separated", "aria-label": "Users" });
  const groups = el("input", { type: "text", "data-test": "share-groups", placeholder: "groups, comma-separated", "aria-label": "Groups" });
  const save = el("button", { type: "button", class: "btn btn-small", "data-test": "share-save", text: "Save" });
  const note = el("span", { class: "muted", "data-test": "share-note", role: "status" });
  const box = el("div", { class: "sharing", "data-test": "sharing", hidden: true }, [level, users, groups, save, note]);

  save.addEventListener("click", () => {
    const body = { level: level.value, users: names(users.value), groups: names(groups.value) };
    save.disabled = true;
    setText(note, "Saving…");
    api.call("PUT", path, body)
      .then(() => setText(note, "Saved"), (e) => setText(note, e.message))
      .then(() => { save.disabled = false; });
  });

  // Opens the box with what is saved now, or closes it.
  function toggle() {
    const opening = box.hidden;
    show(box, opening);
    if (!opening) return;
    setText(note, "Loading…");
    api.call("GET", path).then(
      (sharing) => {
        level.value = sharing.level || "owner";
        users.value = (sharing.users || []).join(", ");
        groups.value = (sharing.groups || []).join(", ");
        setText(note, "");
      },
      (e) => setText(note, e.message)
    );
  }

  return { box, toggle };
}
