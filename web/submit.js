// submit.js: the Submit page: a request (kind, class, count, share, fallbacks with their
// wait), answered at once with the decision or the reason it waits.
import { api } from "./api.js";
import { h, replace, status, say, clock } from "./dom.js";

export function render(main, ctx) {
  const note = status();
  const result = h("div", { id: "submit-result", "aria-live": "polite" });
  const field = (id, label, input, hint) => h("div.field", {}, h("label", { for: id }, label), input, hint ? h("p.hint", { id: `${id}-hint` }, hint) : null);
  const kind = h("select", { id: "f-kind", name: "kind" }, ["vm", "container", "notebook", "endpoint"].map((k) => h("option", { value: k }, k)));
  const cls = h("select", { id: "f-class", name: "class", required: true });
  const count = h("input", { id: "f-count", name: "count", type: "number", min: 1, max: 64, value: 1, required: true });
  const share = h("input", { id: "f-share", name: "share", type: "checkbox" });
  const fallback = h("select", { id: "f-fallback", name: "fallback", multiple: true, size: 5, "aria-describedby": "f-fallback-hint" });
  const wait = h("input", { id: "f-wait", name: "wait_s", type: "number", min: 0, max: 86400, value: 60, "aria-describedby": "f-wait-hint" });
  const form = h("form.card.submit", { id: "submit-form", "aria-labelledby": "submit-title" },
    h("h2", { id: "submit-title" }, "Submit a request"),
    h("p.hint", {}, `As ${ctx.who.user}.`),
    field("f-kind", "Kind", kind),
    field("f-class", "Class", cls),
    field("f-count", "Count", count),
    h("div.field.check", {}, share, " ", h("label", { for: "f-share" }, "Share a GPU (time slice) where the class allows")),
    field("f-fallback", "Fallback classes, in order", fallback, "Optional. Ctrl/⌘-click or Shift+arrows to choose several."),
    field("f-wait", "Wait for the first class (seconds) before falling back", wait, "R13: the fallback never opens before this."),
    h("button", { type: "submit" }, "Submit"), note);
  main.append(form, result);

  api("/v1/classes").then(({ classes }) => {
    const names = classes.map((c) => c.name).concat("cpu");
    replace(cls, names.map((n) => h("option", { value: n }, n)));
    replace(fallback, names.map((n) => h("option", { value: n }, n)));
  }, (e) => say(note, e.message, "error"));

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = { kind: kind.value, class: cls.value, count: Number(count.value) };
    if (share.checked) body.share = true;
    const fb = [...fallback.selectedOptions].map((o) => o.value);
    if (fb.length) {
      body.fallback = fb;
      body.wait_s = Number(wait.value);
    }
    say(note, "Submitting…");
    try {
      const r = await api("/v1/requests", { method: "POST", body });
      say(note, `Request ${r.id}: ${r.state}.`);
      const p = r.placement;
      replace(result, h("section.card.decision", { "data-state": r.state, "aria-label": "Decision" },
        h("h3", {}, `Request ${r.id}: `, h("span", { id: "decision-state" }, r.state)),
        h("p.reason", { id: "decision-reason" }, r.reason || ""),
        r.queue_position ? h("p", { id: "decision-position" }, `Queue position ${r.queue_position}.`) : null,
        r.fallback_at_ms ? h("p", {}, `The fallback opens at ${clock(r.fallback_at_ms)}.`) : null,
        p ? h("p", {}, `On `, h("span.name", {}, p.node), ` by ${p.method}, devices ${(p.addresses || p.devices || []).join(", ") || "—"}.`) : null,
        h("p", {}, h("a", { href: "#queue" }, "See it in the queue"))));
    } catch (e) {
      say(note, e.message, "error");
      replace(result);
    }
  });
  return () => {};
}
