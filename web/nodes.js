// nodes.js: the Nodes page: each node with its GPUs (class, binding, MIG layout drawn as slice
// geometry, state, quarantine reason), the workloads on it, reachable or lost; cordon /
// uncordon and mode switch (with a drain choice) where the token may, with the switch's
// steps shown live.
import { api, poll, liveRequests } from "./api.js";
import { h, svg, replace, table, status, say, clock } from "./dom.js";

const STEPS = ["cordon", "drain", "rebind", "verify", "uncordon", "done"];

// R3: the GPUs of a datacenter node on another driver than the node's mode (a switch failed
// half-way), as the server marks them: it refuses an uncordon until a switch to the node's
// mode brings them back.
const offMode = (n) => n.devices.map((d, i) => (d.off_mode ? i : -1)).filter((i) => i >= 0);

// MIG geometry: 8 memory slices; a profile "Ng.Mgb" spans M / card memory of them.
function migLayout(d) {
  if (!d.mig_enabled) return "—";
  const total = d.memory_gb || 1;
  const slices = (d.mig || []).map((m) => {
    const mem = parseFloat((m.profile.split(".")[1] || "").replace("gb", "")) || total / 8;
    const width = Math.max(1, Math.min(8 - m.start, Math.round((mem / total) * 8)));
    return { ...m, width };
  });
  const label = slices.length ? slices.map((m) => `${m.profile} at slice ${m.start}`).join(", ") : "MIG on, no instances";
  const W = 160, cell = W / 8;
  return svg("svg", { viewBox: `0 0 ${W} 22`, role: "img", "aria-label": `MIG layout: ${label}`, class: "mig" },
    ...Array.from({ length: 8 }, (_, i) => svg("rect", { x: i * cell + 0.5, y: 0.5, width: cell - 1, height: 21, class: "slot" })),
    ...slices.map((m) => svg("g", {},
      svg("rect", { x: m.start * cell + 1, y: 1, width: m.width * cell - 2, height: 20, rx: 2, class: "slice" }),
      svg("text", { x: m.start * cell + (m.width * cell) / 2, y: 15, class: "slice-label" }, m.width >= 2 ? m.profile : m.profile.split(".")[0]))));
}

function steps(sw) {
  const at = sw.step === "failed" ? -1 : STEPS.indexOf(sw.step);
  return h("div.switch", { role: "group", "aria-label": "Mode switch" },
    h("p", {}, `Switch to ${sw.mode} (drain: ${sw.drain}${sw.gpu >= 0 ? `, GPU ${sw.gpu}` : ""}), started ${clock(sw.started_ms)}: `, h("strong", { "data-step": sw.step }, sw.step)),
    h("ol.steps", {}, STEPS.map((s, i) => h("li", { "data-state": sw.step === "failed" ? "failed" : i < at || sw.step === "done" ? "done" : i === at ? "now" : "todo", "aria-current": i === at && sw.step !== "done" ? "step" : null }, s))),
    sw.message ? h("p.reason", {}, sw.message) : null);
}

export function render(main, ctx) {
  const note = status();
  const list = h("div.nodes", { id: "nodes-list" });
  main.append(h("h2", {}, "Nodes"), note, list);
  // The server's rule (control-plane.md): an owner token acts on the nodes it names that its
  // user owns, so a node named in the token but owned by someone else shows no controls.
  const may = (n) =>
    ctx.who.role === "admin" ||
    (ctx.who.role === "owner" && ctx.who.nodes.includes(n.name) && n.owner === ctx.who.user);

  const post = async (n, what, body) => {
    try {
      const r = await api(`/v1/nodes/${encodeURIComponent(n.name)}/${what}`, { method: "POST", body });
      // The server's own sentence when it has one ("already in vm-passthrough mode"): a switch
      // that did nothing is not reported as done.
      say(note, r.message ? `${n.name}: ${r.message}` : `${n.name}: ${what === "mode" ? (r.switch ? `switch ${r.switch.step}` : "mode set") : `${what} done`}.`);
      refresh();
    } catch (e) {
      say(note, `${n.name}: ${e.message}`, "error");
    }
  };

  const controls = (n) => {
    // One id per name: every character an id may not hold, "_" included, becomes "_" and its
    // code, so "a.b" and "a_b" do not share their controls' ids.
    const id = `n-${n.name.replace(/[^a-z0-9-]/gi, (ch) => `_${ch.codePointAt(0).toString(16)}`)}`;
    // A switch under way holds its own cordon (R4): a whole node's is not lifted, and a node
    // switches once at a time; the server refuses both, so the page says why beforehand.
    const switching = n.switch && !["done", "failed"].includes(n.switch.step);
    const wholeSwitch = switching && !(Number.isInteger(n.switch.gpu) && n.switch.gpu >= 0);
    const busy = switching ? `switching to ${n.switch.mode} (step: ${n.switch.step})` : "";
    // The same switch asked again with evict stops the workloads it waits for (R4).
    const escalate = switching && ["cordon", "drain"].includes(n.switch.step) && n.switch.drain !== "evict";
    const off = switching ? [] : offMode(n);
    const stuck = off.length ? `${off.length} GPU(s) are not in ${n.mode} mode (a switch failed half-way, R3): switch the node to ${n.mode} to bring them back` : "";
    // Modes are per datacenter node (R3) or per lab GPU (R7); a machine without GPUs has none.
    const switchable = n.site_kind === "datacenter" || (n.site_kind === "lab" && n.devices.length > 0);
    // Offered first: the other mode; during a switch, that switch (to ask it again with evict);
    // with GPUs out of the node's mode, the way back.
    const target = switching ? n.switch.mode : off.length ? n.mode : null;
    const mode = h("select", { id: `${id}-mode` }, ["container", "vm-passthrough"].map((m) => h("option", { value: m, selected: target ? m === target : m !== n.mode }, m)));
    const drain = h("select", { id: `${id}-drain` },
      [["none", "no drain (refused while workloads run)"], ["wait", "wait for workloads to end"], ["evict", "evict workloads"]].map(([v, t]) => h("option", { value: v, selected: escalate && v === "evict" }, t)));
    const gpus = n.site_kind === "datacenter" ? null : h("select", { id: `${id}-gpu` }, n.devices.map((d, i) => h("option", { value: String(i) }, `GPU ${i} (${d.pci})`)));
    return h("form.controls", { "aria-label": `Actions for ${n.name}`, on: { submit: (ev) => { ev.preventDefault(); post(n, "mode", { mode: mode.value, drain: drain.value, ...(gpus ? { gpu: gpus.value } : {}) }); } } },
      h("button", { type: "button", "data-action": n.cordoned ? "uncordon" : "cordon", "data-control": "cordon",
        disabled: n.cordoned && (wholeSwitch || !!stuck),
        title: n.cordoned && wholeSwitch ? `${busy}: the switch keeps the node cordoned until it ends` : n.cordoned && stuck ? stuck : null,
        on: { click: () => post(n, n.cordoned ? "uncordon" : "cordon") } }, n.cordoned ? "Uncordon" : "Cordon"),
      switchable ? [
        h("span.field", {}, h("label", { for: mode.id }, "Mode"), mode),
        h("span.field", {}, h("label", { for: drain.id }, "Drain"), drain),
        gpus ? h("span.field", {}, h("label", { for: gpus.id }, "GPU"), gpus) : null,
        h("button", { type: "submit", "data-action": "switch", "data-control": "switch", disabled: switching && !escalate,
          title: escalate ? `${busy}: ask it again with "evict workloads" to stop them now` : switching ? `${busy}: one switch at a time` : null }, "Switch mode"),
        switching ? h("span.hint", {}, busy) : stuck ? h("span.hint", {}, stuck) : null] : null);
  };

  let sig = "";
  const refresh = async () => {
    const [{ nodes }, reqs] = await Promise.all([api("/v1/nodes"), liveRequests().catch(() => [])]);
    const work = reqs.filter((r) => r.state === "placed" || r.state === "active");
    const s = JSON.stringify([nodes.map((n) => ({ ...n, agent: n.agent ? n.agent.heartbeat_s : 0 })), work]);
    if (s === sig) return;
    sig = s;
    // A re-draw keeps what the user chose and where the keyboard focus was.
    const f = document.activeElement;
    const keep = f && f.id && list.contains(f) ? f.id : null;
    // A button has no id: found again by its node and its control (a Cordon that became
    // Uncordon is the same control), or a keyboard user is thrown back to the top.
    const card = f && f.dataset && f.dataset.control && list.contains(f) ? f.closest("[data-node]") : null;
    const keepButton = card ? [card.dataset.node, f.dataset.control] : null;
    const chosen = new Map([...list.querySelectorAll("select")].map((el) => [el.id, el.value]));
    replace(list, nodes.map((n) => {
      const wl = work.filter((r) => r.placement && r.placement.node === n.name);
      return h("section.card.node", { "aria-labelledby": `h-${n.name}`, "data-node": n.name },
        h("h3", { id: `h-${n.name}` }, h("span.name", {}, n.name), " ",
          h("span.badge", { "data-kind": n.unreachable ? "bad" : n.agent ? "ok" : "warn" }, n.unreachable ? "lost" : n.agent ? "reachable" : "no agent"),
          n.cordoned ? h("span.badge", { "data-kind": "warn" }, "cordoned") : null),
        h("p.meta", {}, `site ${n.site} (${n.site_kind}) · ${n.platform}${n.mode ? ` · mode ${n.mode}` : ""} · owner `, h("span.name", {}, n.owner),
          n.capabilities.length ? ` · ${n.capabilities.join(", ")}` : ""),
        // Why it is cordoned, when whoever cordoned it said (a bad mode label, R3; an operator).
        n.cordoned && n.cordon_reason ? h("p.cordon", {}, "Cordoned: ", h("span.reason", {}, n.cordon_reason)) : null,
        n.devices.length ? table(`GPUs of ${n.name}`, ["PCI", "Class", "Memory", "Binding", "MIG layout", "State", "Quarantine"],
          n.devices.map((d, i) => [h("code", {}, d.pci), h("span.name", {}, d.class || "unclassified"), d.memory_gb ? `${d.memory_gb} GB` : "—",
            offMode(n).includes(i) ? `${d.binding} (not the node's ${n.mode} mode)` : d.binding || "—", migLayout(d), d.state || "—", d.quarantined ? [h("span.reason", {}, d.quarantined),
              // R9: once the board is seen to, its owner lifts the quarantine (a new reset check follows).
              may(n) ? [" ", h("button", { type: "button", "data-action": "unquarantine", "data-control": `lift-${i}`, "aria-label": `Lift the quarantine of GPU ${i} of ${n.name}`,
                on: { click: () => post(n, "unquarantine", { gpu: String(i) }) } }, "Lift")] : null] : "—"]))
          : n.apple_gpu ? h("p", {}, `Apple GPU, ${n.apple_gpu.class || "unclassified (no class for its memory)"}: ${n.apple_unified_memory_gb} GB unified memory, ${n.apple_gpu.usable_memory_gb} GB of it usable for GPU work, ${n.apple_gpu.used_memory_gb} GB in use; ${n.apple_gpu.state}`,
              n.apple_gpu.quarantined ? [" (", h("span.reason", {}, n.apple_gpu.quarantined), ")"] : null, `. ${n.cpus || 0} CPU cores.`)
          : h("p", {}, `No GPUs (${n.cpus || 0} CPU cores).`),
        h("p", {}, "Workloads: ", wl.length ? wl.map((r, i) => [i ? ", " : "", `#${r.id} ${r.request.kind} of `, h("span.name", {}, r.user), ` (${r.state})`]) : "none visible to you"),
        n.switch ? steps(n.switch) : null,
        may(n) ? controls(n) : null);
    }));
    for (const [id, v] of chosen) {
      const el = document.getElementById(id);
      if (el) el.value = v;
    }
    if (keep) document.getElementById(keep)?.focus();
    if (keepButton) {
      const again = [...list.querySelectorAll("[data-node]")].find((c) => c.dataset.node === keepButton[0]);
      const button = again && [...again.querySelectorAll("[data-control]")].find((b) => b.dataset.control === keepButton[1]);
      // A control the redraw disabled (Switch mode once its switch runs) cannot hold the focus:
      // the card's first control that can takes it, not the page's top.
      const usable = button && !button.disabled ? button : again && [...again.querySelectorAll("button, select")].find((el) => !el.disabled);
      usable?.focus();
    }
  };
  return poll(refresh, 1000, (e) => (e.status === 401 ? ctx.onAuthLost() : say(note, e.message, "error")));
}
