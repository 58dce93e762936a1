// queue.js: the Queue page: waiting requests with their reason, position, wait so far and
// when their fallback opens (R13); placed and running ones with node, devices, method and
// runtime; cancel / release where the token may (the API decides, the page only offers).
import { api, poll, liveRequests } from "./api.js";
import { h, replace, table, status, say, duration, clock } from "./dom.js";

function what(r) {
  const q = r.request;
  // A class with a memory need (a Mac's GPU memory, a MIG slice's) says both.
  const need = q.class ? `${q.count || 1} × ${q.class}${q.memory_gb ? ` (${q.memory_gb} GB)` : ""}` : `${q.memory_gb} GB`;
  return `${q.kind} · ${need}${q.share ? " · shared" : ""}`;
}

export function render(main, ctx) {
  const note = status();
  const waiting = h("div", { id: "queue-waiting" });
  const running = h("div", { id: "queue-running" });
  const ended = h("div", { id: "queue-ended" });
  main.append(h("h2", {}, "Queue"),
    h("p.hint", {}, ctx.who.role === "admin" ? "Every user's requests." : `Requests of ${ctx.who.user}.`),
    note, h("h3", {}, "Waiting"), waiting, h("h3", {}, "Placed and running"), running, h("h3", {}, "Ended (latest 20)"), ended);

  const act = (r, verb) => h("button", {
    type: "button", "data-action": verb, "data-id": r.id, "aria-label": `${verb} request ${r.id}`,
    on: {
      click: async (ev) => {
        ev.target.disabled = true;
        try {
          await api(`/v1/requests/${r.id}/${verb}`, { method: "POST" });
          say(note, `Request ${r.id}: ${verb} done.`);
          refresh();
        } catch (e) {
          say(note, `Request ${r.id}: ${e.message}`, "error");
          ev.target.disabled = false;
        }
      },
    },
  }, verb === "cancel" ? "Cancel" : "Release");
  const mine = (r) => ctx.who.role === "admin" || r.user === ctx.who.user;

  let sig = "";
  const refresh = async () => {
    // The live ones in full, the ended ones of the latest 100: never all history.
    const [requests, { requests: latest }] = await Promise.all([liveRequests(), api("/v1/requests?last=100")]);
    const now = Date.now();
    const s = JSON.stringify([requests, latest]) + Math.floor(now / 1000);
    if (s === sig) return;
    sig = s;
    const f = document.activeElement;
    const keep = f && f.dataset && f.dataset.action ? `[data-action="${f.dataset.action}"][data-id="${f.dataset.id}"]` : null;
    const pending = requests.filter((r) => r.state === "pending").sort((a, b) => (a.queue_position || 0) - (b.queue_position || 0));
    replace(waiting, pending.length ? table("Waiting requests", ["#", "Position", "User", "Request", "Why it waits", "Waiting for", "Fallback", ""],
      pending.map((r) => [String(r.id), String(r.queue_position ?? "—"), h("span.name", {}, r.user), what(r),
        h("span.reason", {}, r.reason || ""), duration(now - r.created_ms),
        r.fallback_at_ms ? (r.fallback_at_ms > now ? `${(r.request.fallback || []).join(", ")} opens at ${clock(r.fallback_at_ms)} (in ${duration(r.fallback_at_ms - now)})` : `open: ${(r.request.fallback || []).join(", ")}`) : "—",
        mine(r) ? act(r, "cancel") : ""])) : h("p", {}, "Nothing waits."));
    const live = requests.filter((r) => r.state === "placed" || r.state === "active");
    replace(running, live.length ? table("Placed and running requests", ["#", "State", "User", "Request", "Node", "Devices", "Method", "Runtime", "Running for", ""],
      live.map((r) => {
        const p = r.placement || {};
        const rt = [p.container_runtime, p.endpoint_runtime].filter((x) => x && x !== "none").join(", ") || "—";
        return [String(r.id), r.state, h("span.name", {}, r.user), what(r), h("span.name", {}, p.node || "—"),
          (p.addresses || p.devices || []).join(", ") || (p.cpu_cores ? `${p.cpu_cores} core${p.cpu_cores === 1 ? "" : "s"}` : "—"), p.method || "—", rt,
          duration(now - (r.placed_ms || r.created_ms)),
          mine(r) ? h("span.actions", {}, r.state === "placed" ? act(r, "cancel") : null, act(r, "release")) : ""];
      })) : h("p", {}, "Nothing is placed."));
    const done = latest.filter((r) => !["pending", "placed", "active"].includes(r.state)).slice(0, 20);
    replace(ended, done.length ? table("Ended requests", ["#", "State", "User", "Request", "Reason"],
      done.map((r) => [String(r.id), r.state, h("span.name", {}, r.user), what(r), h("span.reason", {}, r.reason || "")])) : h("p", {}, "None yet."));
    if (keep) main.querySelector(keep)?.focus(); // a re-draw must not throw a keyboard user out
  };
  return poll(refresh, 1000, (e) => (e.status === 401 ? ctx.onAuthLost() : say(note, e.message, "error")));
}
