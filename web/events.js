// events.js: the Events page: the live change feed (long-poll on /v1/events), filterable by
// type and text. Non-admin tokens see only their own objects' events (the API filters).
import { api } from "./api.js";
import { h, replace, status, say, clock } from "./dom.js";

const KEEP = 500;

export function render(main, ctx) {
  const note = status();
  const text = h("input", { id: "ev-filter", type: "search", placeholder: "node, request, user…" });
  const type = h("select", { id: "ev-type" }, h("option", { value: "" }, "every type"));
  const list = h("ol.events", { id: "events-list", "aria-live": "off" });
  const count = h("p.hint", {});
  main.append(h("h2", {}, "Events"),
    h("form.filters", { role: "search", on: { submit: (e) => e.preventDefault() } },
      h("span.field", {}, h("label", { for: "ev-filter" }, "Filter"), text),
      h("span.field", {}, h("label", { for: "ev-type" }, "Type"), type)),
    note, count, list);

  const events = [];
  const types = new Set();
  const draw = () => {
    const q = text.value.trim().toLowerCase(), t = type.value;
    const shown = events.filter((e) => (!t || e.type === t) &&
      (!q || [e.type, e.object, e.actor, e.user, JSON.stringify(e.data || {})].some((x) => String(x || "").toLowerCase().includes(q))));
    count.textContent = `${shown.length} of ${events.length} event(s), newest first; live.`;
    replace(list, shown.slice(-200).reverse().map((e) => h("li", { "data-type": e.type },
      h("time", { datetime: new Date(e.time_ms).toISOString() }, clock(e.time_ms)), " ",
      h("strong", {}, e.type), " ", h("span.name", {}, e.object || ""), " by ", h("span.name", {}, e.actor || "?"),
      e.data && (e.data.reason || e.data.message) ? h("span.reason.line", {}, e.data.reason || e.data.message) : null,
      e.data ? h("code.data", {}, JSON.stringify(e.data)) : null)));
  };
  text.addEventListener("input", draw);
  type.addEventListener("change", draw);

  const abort = new AbortController();
  let after = 0;
  (async () => {
    while (!abort.signal.aborted) {
      try {
        const r = await api(`/v1/events?after=${after}&wait=25&limit=1000`, { signal: abort.signal });
        for (const e of r.events) {
          events.push(e);
          if (!types.has(e.type)) {
            types.add(e.type);
            type.append(h("option", { value: e.type }, e.type));
          }
        }
        if (events.length > KEEP) events.splice(0, events.length - KEEP);
        after = r.next;
        say(note, "");
        if (r.events.length) draw();
      } catch (e) {
        if (abort.signal.aborted) return;
        if (e.status === 401) return ctx.onAuthLost();
        // The feed says where to read from again: past its retention (410, oldest), or a
        // cursor this server never gave (400, newest: a state restored from a backup).
        const from = e.status === 410 ? e.data?.oldest : e.status === 400 ? e.data?.newest : undefined;
        if (Number.isInteger(from)) {
          after = from;
          continue;
        }
        say(note, `${e.message} Retrying…`, "error");
        await new Promise((res) => setTimeout(res, 2000));
      }
    }
  })();
  draw();
  return () => abort.abort();
}
