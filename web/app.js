// app.js: sign-in, the page shell and the hash router (#capacity, #queue, #nodes, #events,
// #submit). Each page module exports render(main, ctx) and returns a function that stops it.
import { api, token, ApiError } from "./api.js";
import { h, replace, status, say } from "./dom.js";
import * as capacity from "./capacity.js";
import * as queue from "./queue.js";
import * as nodes from "./nodes.js";
import * as events from "./events.js";
import * as submit from "./submit.js";

const pages = { capacity, queue, nodes, events, submit };
const titles = { capacity: "Capacity", queue: "Queue", nodes: "Nodes", events: "Events", submit: "Submit" };
const main = document.getElementById("main");
let stop = null;
let who = null;

function signIn(message) {
  who = null;
  document.getElementById("nav").hidden = true;
  document.getElementById("who").hidden = true;
  const input = h("input", { id: "token", type: "password", autocomplete: "off", required: true, spellcheck: "false" });
  const note = status();
  if (message) say(note, message, "error");
  const form = h("form.card.signin", { "aria-labelledby": "signin-title" },
    h("h2", { id: "signin-title" }, "Sign in"),
    h("p", {}, "Paste your API token (einsora token create, or the file einsora up prints). It is kept in this tab only."),
    h("label", { for: "token" }, "Token"), input,
    h("button", { type: "submit" }, "Sign in"), note);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    token.set(input.value.trim());
    await start();
  });
  replace(main, form);
  document.title = "Sign in · Einsora GPU";
  input.focus();
}

async function start() {
  try {
    who = await api("/v1/whoami");
  } catch (e) {
    token.clear();
    signIn(e instanceof ApiError && e.status === 401 ? "That token is not valid." : e instanceof ApiError && e.status === 0 ? e.message : `Cannot reach the server: ${e.message}`);
    return;
  }
  document.getElementById("nav").hidden = false;
  document.getElementById("who").hidden = false;
  document.getElementById("who-text").textContent = `${who.user} (${who.role})`;
  // A node's token is its agent's: it may not submit (the server answers 403), so the page
  // does not offer it.
  for (const a of document.querySelectorAll("#nav a"))
    if (a.getAttribute("href") === "#submit") a.hidden = !mayOpen("submit");
  route();
}

function mayOpen(page) {
  return page !== "submit" || who.role !== "node";
}

function route() {
  if (!who) return;
  if (stop) stop();
  stop = null;
  const asked = location.hash.slice(1);
  const name = pages[asked] && mayOpen(asked) ? asked : "capacity";
  for (const a of document.querySelectorAll("#nav a"))
    if (a.getAttribute("href") === `#${name}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  document.title = `${titles[name]} · Einsora GPU`;
  replace(main);
  stop = pages[name].render(main, { who, onAuthLost: () => signIn("The token is no longer valid.") });
}

window.addEventListener("hashchange", () => {
  route();
  main.focus();
});
document.getElementById("sign-out").addEventListener("click", () => {
  if (stop) stop();
  stop = null;
  token.clear();
  signIn();
});

if (token.get()) start();
else signIn();
