// capacity.js: the Capacity page: per class x mode x site units (R6) with resource names, and
// allocated vs free per class over the last hours (the server's capacity ring).
import { api, poll } from "./api.js";
import { h, replace, table, status, say } from "./dom.js";
import { lineChart } from "./chart.js";

export function render(main, ctx) {
  const note = status();
  const showEmpty = h("input", { type: "checkbox", id: "show-empty" });
  const rows = h("div", { id: "capacity-table" });
  const charts = h("div.charts", { id: "capacity-charts" });
  let last = null;
  main.append(
    h("h2", {}, "Capacity"),
    h("p.hint", {}, "Units per GPU class, mode and site. MIG slice classes count slices; free MIG slices are what still fits next to the others."),
    h("p", {}, showEmpty, " ", h("label", { for: "show-empty" }, "Show classes with no units")),
    note, rows,
    h("h3", {}, "Allocated and free over time"), charts);

  const draw = () => {
    if (!last) return;
    const list = last.classes.filter((r) => showEmpty.checked || r.total > 0);
    replace(rows, table("Capacity by class, mode and site", ["Class", "Mode", "Site", "Total", "Free", "Allocated", "Cordoned", "Quarantined", "Resource"],
      list.map((r) => [h("span.name", {}, r.class), r.mode, r.site === null ? "all sites" : r.site, String(r.total), String(r.free),
        String(r.allocated), String(r.cordoned), String(r.quarantined),
        h("code", {}, [r.resource || "—", r.node_selector ? ` (${r.node_selector})` : ""])])));
    if (last.unclassified) rows.append(h("p", {}, `${last.unclassified} device(s) match no class; they are listed on the Nodes page.`));
  };
  showEmpty.addEventListener("change", draw);
  const stopCap = poll(async () => {
    last = await api("/v1/capacity");
    draw();
    say(note, "");
  }, 3000, (e) => (e.status === 401 ? ctx.onAuthLost() : say(note, e.message, "error")));
  const stopHist = poll(async () => {
    const hist = await api("/v1/capacity/history");
    const nonEmpty = hist.classes.filter((c) => c.points.some((p) => p[1] + p[2] > 0));
    replace(charts, nonEmpty.length ? nonEmpty.map((c) => lineChart(c.class, c.points)) : h("p", {}, "No samples yet."));
  }, 20000, (e) => replace(charts, h("p", {}, `The chart is unavailable: ${e.message}`)));
  return () => {
    stopCap();
    stopHist();
  };
}
