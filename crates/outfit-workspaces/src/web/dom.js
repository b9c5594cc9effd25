// The few DOM helpers every part of the page uses. Nothing here runs at import time, so the pure
// modules that import it still load in node.

export function $(id) {
  return document.getElementById(id);
}

// Attributes the DOM has no property for (or whose property differs), set with setAttribute.
const ATTRIBUTES = new Set(["role", "for", "title", "type", "href", "target", "rel"]);

// An element with `attrs` (`text`, `class`, data-/aria- attributes, or properties) and
// `children` (nodes or strings; null, undefined and false are skipped).
export function el(tag, attrs, children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else if (key.startsWith("data-") || key.startsWith("aria-") || ATTRIBUTES.has(key)) {
      node.setAttribute(key, value === true ? "" : String(value));
    } else node[key] = value;
  }
  for (const child of children || []) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

export function show(node, visible) {
  node.hidden = !visible;
}

// Writes only when the text changes, so a re-render doesn't disturb a selection or a screen
// reader.
export function setText(node, text) {
  const value = text === null || text === undefined ? "" : String(text);
  if (node.textContent !== value) node.textContent = value;
}

// Shows `message` in the error place `id` (a [data-test] paragraph), or hides it when empty.
export function showError(id, message) {
  setText($(id), message || "");
  show($(id), !!message);
}
