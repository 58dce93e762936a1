// chart.js: a small SVG step chart of allocated vs free units over time (no library: two
// lines and an axis are all it needs).
import { h, svg, clock } from "./dom.js";

const W = 320, H = 120, PAD = 28;

// points: [[time_ms, allocated, free], ...]
export function lineChart(title, points) {
  const t0 = points[0][0], t1 = Math.max(points[points.length - 1][0], t0 + 1);
  const max = Math.max(1, ...points.map((p) => p[1] + p[2]));
  const x = (t) => PAD + ((t - t0) / (t1 - t0)) * (W - PAD - 6);
  const y = (v) => H - 18 - (v / max) * (H - 28);
  const path = (k) => points.map((p, i) => (i ? `H${x(p[0]).toFixed(1)}V${y(p[k]).toFixed(1)}` : `M${x(p[0]).toFixed(1)},${y(p[k]).toFixed(1)}`)).join("");
  const last = points[points.length - 1];
  const summary = `${title}: now ${last[1]} allocated, ${last[2]} free; ${points.length} sample(s) since ${clock(t0)}.`;
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": summary, class: "chart" },
    svg("line", { x1: PAD, y1: H - 18, x2: W - 6, y2: H - 18, class: "axis" }),
    svg("text", { x: 2, y: 14, class: "tick" }, String(max)),
    svg("text", { x: 2, y: H - 18, class: "tick" }, "0"),
    svg("text", { x: PAD, y: H - 4, class: "tick" }, clock(t0)),
    svg("text", { x: W - 6, y: H - 4, class: "tick end" }, clock(t1)),
    svg("path", { d: path(2), class: "free" }),
    svg("path", { d: path(1), class: "allocated" }));
  return h("figure.card.chart-card", {},
    h("figcaption", {}, h("span.name", {}, title), " ", h("span.key.allocated", {}, "allocated"), " ", h("span.key.free", {}, "free")),
    chart);
}
