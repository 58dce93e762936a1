// dom.js: build elements from data. Every string becomes a text node (never HTML), so a name
// like "<img src=x onerror=...>" is shown as those characters.

// h("tag.class", {attr: value, on: {click: fn}}, child, ...): children are nodes or strings
// (text), arrays are flattened, null/false are skipped.
export function h(spec, attrs, ...children) {
  const [tag, ...classes] = spec.split(".");
  const el = document.createElement(tag || "div");
  if (classes.length) el.className = classes.join(" ");
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "on") for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else if (k.startsWith("on")) throw new Error("event handlers go in 'on'");
    else if (v === true) el.setAttribute(k, "");
    else if (v !== false && v !== null && v !== undefined) el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export const SVG_NS = "http://www.w3.org/2000/svg";
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) if (c) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

// A table from column headers and rows of cells (nodes or strings).
export function table(caption, headers, rows) {
  return h("div.scroll", { tabindex: 0, role: "region", "aria-label": caption },
    h("table", {},
      h("caption", {}, caption),
      h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c)))))));
}

export function duration(ms) {
  if (ms < 0) ms = 0;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function clock(ms) {
  return new Date(ms).toLocaleTimeString();
}

// A status line for errors and results, read out by screen readers.
export function status() {
  return h("p.status", { role: "status", "aria-live": "polite" });
}
export function say(el, text, kind) {
  el.textContent = text;
  el.dataset.kind = kind || "info";
}
