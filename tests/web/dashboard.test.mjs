// dashboard.test.mjs: the web dashboard in a real browser (Debian's chromium, headless, via
// playwright-core) against a real `einsora up --demo` fleet. Run with `node --test` from this
// directory (meson does: tests/web/meson.build). Screenshots of every page at desktop and phone
// width go to $EINSORA_SCREENSHOTS (default build/screenshots).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createRequire } from "node:module";
import { chromium } from "playwright-core";
import { startFleet, apiAs, until, SOURCE } from "./fleet.mjs";

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const SHOTS = process.env.EINSORA_SCREENSHOTS || join(SOURCE, "build/screenshots");
const PAGES = ["capacity", "queue", "nodes", "events", "submit"];
const XSS = "<img src=x onerror=alert(1)>";

let fleet, browser;
const opened = [];

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  fleet = await startFleet();
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox"], // the tests run as root
  });
});

after(async () => {
  if (browser) await browser.close();
  if (fleet) await fleet.stop();
});

// A page that records console errors, page errors, dialogs and every request leaving the
// server's origin; clean() asserts there were none.
async function newPage(viewport = { width: 1440, height: 900 }) {
  const ctx = await browser.newContext({ viewport });
  ctx.setDefaultTimeout(60000); // a loaded 2-core machine is slow; the deadline is only a bound
  const page = await ctx.newPage();
  const origin = new URL(fleet.url).origin;
  const bad = [];
  page.on("console", (m) => m.type() === "error" && bad.push(`console: ${m.text()}`));
  page.on("pageerror", (e) => bad.push(`page error: ${e.message}`));
  page.on("dialog", (d) => {
    bad.push(`dialog: ${d.message()}`);
    d.dismiss();
  });
  page.on("request", (r) => {
    const u = new URL(r.url());
    if (u.origin !== origin && u.protocol !== "data:") bad.push(`request outside the origin: ${r.url()}`);
  });
  page.clean = () => assert.deepEqual(bad, [], "the page stayed clean");
  page.bad = bad;
  opened.push(ctx);
  return page;
}

async function signIn(page, tok) {
  await page.goto(fleet.url + "/");
  await page.fill("#token", tok);
  await page.click("form.signin button[type=submit]");
  await page.waitForSelector("#nav:not([hidden])");
}

async function go(page, name) {
  await page.evaluate((n) => (location.hash = n), name);
  await page.waitForFunction((n) => document.title.startsWith(n[0].toUpperCase() + n.slice(1)), name);
}

test("web_security_headers_on_the_page_and_the_api", async () => {
  for (const path of ["/", "/app.js", "/v1/capacity"]) {
    const res = await fetch(fleet.url + path, { headers: { Authorization: `Bearer ${fleet.admin}` } });
    assert.equal(res.status, 200, path);
    const csp = res.headers.get("content-security-policy");
    assert.match(csp, /script-src 'self'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.equal(res.headers.get("x-content-type-options"), "nosniff");
    assert.equal(res.headers.get("referrer-policy"), "no-referrer");
    assert.equal(res.headers.get("x-frame-options"), "DENY");
    // An answer carries a user's view: never stored; the page's files are revalidated.
    assert.equal(res.headers.get("cache-control"), path.startsWith("/v1/") ? "no-store" : "no-cache", path);
  }
  const js = await fetch(fleet.url + "/app.js");
  assert.match(js.headers.get("content-type"), /^text\/javascript/);
  const html = await (await fetch(fleet.url + "/")).text();
  assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, "no inline script");
  assert.equal((await fetch(fleet.url + "/v1/whoami")).status, 401, "whoami needs a token");
});

test("web_sign_in_with_a_token_kept_in_session_storage", async () => {
  const page = await newPage();
  await page.goto(fleet.url + "/");
  await page.fill("#token", "ens_not_a_token");
  await page.click("form.signin button[type=submit]");
  await page.waitForSelector("form.signin .status[data-kind=error]");
  assert.match(await page.textContent("form.signin .status"), /not valid/);
  page.bad.splice(0); // the refused whoami is logged by chromium as a failed load (401)
  await signIn(page, fleet.admin);
  assert.match(await page.textContent("#who-text"), /\(admin\)/);
  assert.equal(await page.evaluate(() => sessionStorage.getItem("einsora.token")), fleet.admin);
  assert.equal(await page.evaluate(() => document.cookie), "", "no cookie");
  assert.ok(!page.url().includes(fleet.admin), "the token is never in the URL");
  await page.click("#sign-out");
  await page.waitForSelector("#token");
  assert.equal(await page.evaluate(() => sessionStorage.getItem("einsora.token")), null);
  page.clean();
});

test("web_a_node_token_is_not_offered_the_submit_page", async () => {
  // A node's token is its agent's: the server refuses its submits (403), so the page neither
  // lists the Submit page nor opens it when asked by its address.
  const page = await newPage();
  await signIn(page, fleet.token("agent-web", "node", "web-node"));
  assert.match(await page.textContent("#who-text"), /\(node\)/);
  assert.equal(await page.locator('#nav a[href="#submit"]').isHidden(), true);
  await go(page, "events"); // from another page, so that reaching Capacity shows the redirect
  await page.evaluate(() => (location.hash = "submit"));
  await page.waitForFunction(() => document.title.startsWith("Capacity"));
  assert.equal(await page.locator("#submit-form").count(), 0);
  page.clean();
});

test("r6_capacity_page_matches_get_v1_capacity", async () => {
  const page = await newPage();
  await signIn(page, fleet.admin);
  await go(page, "capacity");
  await page.waitForSelector("#capacity-table tbody tr");
  const api = (await apiAs(fleet, fleet.admin, "/v1/capacity")).json;
  const want = api.classes.filter((r) => r.total > 0)
    .map((r) => [r.class, r.mode, r.site === null ? "all sites" : r.site, r.total, r.free, r.allocated, r.cordoned, r.quarantined].join("|")).sort();
  const got = (await page.$$eval("#capacity-table tbody tr", (trs) => trs.map((tr) =>
    [...tr.children].slice(0, 8).map((td) => td.textContent).join("|")))).sort();
  assert.deepEqual(got, want);
  assert.ok(want.length > 5, "the demo fleet has capacity");
  const res = await page.textContent("#capacity-table");
  assert.ok(res.includes("nvidia.com/gpu"), "resource names shown");
  // One allocated-vs-free chart per class with units in the server's ring.
  await page.waitForSelector("#capacity-charts figure");
  const hist = (await apiAs(fleet, fleet.admin, "/v1/capacity/history")).json;
  const charted = hist.classes.filter((c) => c.points.some((p) => p[1] + p[2] > 0)).map((c) => c.class).sort();
  assert.ok(charted.includes("nvidia-h100-80gb"));
  assert.deepEqual((await page.$$eval("#capacity-charts figcaption .name", (els) => els.map((e) => e.textContent))).sort(), charted);
  page.clean();
});

test("web_submit_a_request_and_see_it_placed", async () => {
  const page = await newPage();
  await signIn(page, fleet.admin);
  await go(page, "submit");
  await page.waitForSelector("#f-class option[value=nvidia-h100-80gb]", { state: "attached" });
  await page.selectOption("#f-kind", "notebook");
  await page.selectOption("#f-class", "nvidia-h100-80gb");
  await page.fill("#f-count", "1");
  await page.click("#submit-form button[type=submit]");
  await page.waitForSelector("#decision-state");
  assert.equal(await page.textContent("#decision-state"), "placed");
  assert.match(await page.textContent("#decision-reason"), /placed on dc1-h100/);
  const id = (await page.textContent(".decision h3")).match(/Request (\d+)/)[1];
  await go(page, "queue");
  const row = page.locator("#queue-running tr", { hasText: "nvidia-h100-80gb" }).filter({ has: page.locator("td:first-child", { hasText: new RegExp(`^${id}$`) }) });
  await row.waitFor();
  assert.match(await row.textContent(), /dc1-h100/);
  assert.match(await row.textContent(), /container/);
  page.clean();
});

test("r13_waiting_request_shows_reason_position_and_fallback_time", async () => {
  // Fill the H100s so that alice's request must wait.
  const cap = (await apiAs(fleet, fleet.admin, "/v1/capacity?class=nvidia-h100-80gb")).json;
  const free = cap.classes.find((r) => r.site === null && r.mode === "container").free;
  if (free > 0) {
    const r = await apiAs(fleet, fleet.admin, "/v1/requests", { kind: "notebook", class: "nvidia-h100-80gb", count: free });
    assert.equal(r.json.state, "placed", JSON.stringify(r.json));
  }
  const page = await newPage();
  await signIn(page, fleet.alice);
  await go(page, "submit");
  await page.waitForSelector("#f-class option[value=nvidia-h100-80gb]", { state: "attached" });
  await page.selectOption("#f-kind", "container");
  await page.selectOption("#f-class", "nvidia-h100-80gb");
  await page.selectOption("#f-fallback", ["nvidia-h200-141gb-mig-7g.141gb"]);
  await page.fill("#f-wait", "3600");
  await page.click("#submit-form button[type=submit]");
  await page.waitForSelector("#decision-state");
  assert.equal(await page.textContent("#decision-state"), "pending");
  const id = Number((await page.textContent(".decision h3")).match(/Request (\d+)/)[1]);
  const truth = (await apiAs(fleet, fleet.alice, `/v1/requests/${id}`)).json;
  assert.equal(await page.textContent("#decision-reason"), truth.reason);
  await go(page, "queue");
  const row = page.locator("#queue-waiting tbody tr").filter({ has: page.locator("td:first-child", { hasText: new RegExp(`^${id}$`) }) });
  await row.waitFor();
  const cells = await row.locator("td").allTextContents();
  assert.equal(cells[1], String(truth.queue_position));
  assert.equal(cells[4], truth.reason);
  assert.match(cells[6], /nvidia-h200-141gb-mig-7g\.141gb opens at/);
  await page.screenshot({ path: join(SHOTS, "queue-waiting-desktop.png"), fullPage: true });
  // alice may cancel her own request from the page
  await row.locator("button[data-action=cancel]").click();
  await until("the cancel", async () => (await apiAs(fleet, fleet.alice, `/v1/requests/${id}`)).json.state === "cancelled");
  page.clean();
});

test("web_a_user_cannot_see_another_users_request", async () => {
  const mine = await apiAs(fleet, fleet.alice, "/v1/requests", { kind: "container", class: "cpu", count: 1 });
  assert.equal(mine.status, 201, JSON.stringify(mine.json));
  const page = await newPage();
  await signIn(page, fleet.bob);
  assert.match(await page.textContent("#who-text"), /bob \(user\)/);
  await go(page, "queue");
  await page.waitForSelector("#queue-running p, #queue-running table");
  await page.waitForFunction(() => document.querySelector("#queue-ended p, #queue-ended table"));
  const text = await page.textContent("main");
  assert.ok(!text.includes("alice"), "bob sees nothing of alice's");
  assert.ok(!text.includes("root"), "bob sees nothing of root's");
  assert.equal((await apiAs(fleet, fleet.bob, `/v1/requests/${mine.json.id}`)).status >= 400, true);
  await go(page, "nodes");
  await page.waitForSelector("[data-node=dc1-h100]");
  assert.equal(await page.locator("form.controls").count(), 0, "a user gets no node actions");
  await go(page, "events");
  await page.waitForSelector("#events-list", { state: "attached" });
  assert.ok(!(await page.textContent("#events-list")).includes(`"user":"alice"`));
  page.clean();
});

test("r4_switch_a_node_mode_with_drain_and_watch_the_steps", async () => {
  const page = await newPage();
  await signIn(page, fleet.admin);
  await go(page, "nodes");
  const card = page.locator("[data-node=dc1-h100]");
  await card.waitFor();
  await card.locator("select[id$=-mode]").selectOption("vm-passthrough");
  await card.locator("select[id$=-drain]").selectOption("wait");
  await card.locator("button[data-action=switch]").click();
  // Workloads run on dc1-h100: the switch waits in its drain step, shown live.
  await card.locator(".switch strong[data-step=drain]").waitFor({ timeout: 30000 });
  assert.equal(await card.locator(".steps li[data-state=done]").first().textContent(), "cordon");
  await card.locator(".badge", { hasText: "cordoned" }).waitFor();
  // R4: while it drains, the switch's cordon is not offered for lifting; the switch is offered
  // again only as the way out of the wait: the same switch with its workloads evicted.
  assert.ok(await card.locator("button[data-control=cordon]").isDisabled(), "Uncordon is offered during the switch");
  assert.match(await card.locator("button[data-control=switch]").getAttribute("title"), /evict workloads/);
  assert.equal(await card.locator("select[id$=-mode]").inputValue(), "vm-passthrough");
  await page.screenshot({ path: join(SHOTS, "nodes-switch-draining-desktop.png"), fullPage: true });
  const { requests } = (await apiAs(fleet, fleet.admin, "/v1/requests?limit=10000")).json;
  const running = requests.filter((r) => ["placed", "active"].includes(r.state) && r.placement.node === "dc1-h100");
  assert.ok(running.length > 0);
  await card.locator("select[id$=-drain]").selectOption("evict");
  // By keyboard: the focus stays in the card across the redraws that follow.
  await card.locator("button[data-control=switch]").focus();
  await page.keyboard.press("Enter");
  await card.locator(".switch strong[data-step=done]").waitFor({ timeout: 60000 });
  assert.equal(await page.evaluate(() => document.activeElement.closest("[data-node]")?.dataset.node), "dc1-h100");
  for (const r of running)
    assert.equal((await apiAs(fleet, fleet.admin, `/v1/requests/${r.id}`)).json.state, "released", "evicted by the second ask");
  assert.match(await card.locator(".meta").textContent(), /mode vm-passthrough/);
  assert.equal(await card.locator(".steps li[data-state=done]").count(), 6);
  // The same mode again does nothing, and the page says the server's sentence, not "done".
  await card.locator("select[id$=-mode]").selectOption("vm-passthrough");
  await card.locator("button[data-action=switch]").click();
  await page.locator("[role=status]", { hasText: "already in vm-passthrough mode" }).first().waitFor();
  page.clean();
});

test("r3_a_datacenter_node_a_switch_left_half_way_offers_the_way_back_not_uncordon", async () => {
  // An agent's node in container mode whose first GPU its agent now reports on vfio-pci, as a
  // switch that failed half-way leaves it; the node is cordoned.
  const agent = fleet.token("dc-half", "node", "dc-half");
  const node = (b0) => ({ name: "dc-half", site: "dc9", site_kind: "datacenter", platform: "linux", owner: "root", mode: "container", cpus: 8,
    devices: [{ pci: "0000:18:00.0", class: "nvidia-h100-80gb", binding: b0 }, { pci: "0000:db:00.0", class: "nvidia-h100-80gb", binding: "host" }] });
  const put = (body) => fetch(`${fleet.url}/v1/nodes/dc-half`, { method: "PUT", headers: { Authorization: `Bearer ${agent}`, "Content-Type": "application/json" }, body: JSON.stringify(body) });
  assert.equal((await put(node("host"))).status, 201);
  assert.equal((await apiAs(fleet, agent, "/v1/nodes/dc-half/heartbeat", { interval_s: 3600, running: [] })).status, 200);
  assert.equal((await apiAs(fleet, fleet.admin, "/v1/nodes/dc-half/cordon", {})).status, 200);
  assert.equal((await put(node("vfio"))).status, 200);
  const page = await newPage();
  await signIn(page, fleet.admin);
  await go(page, "nodes");
  const card = page.locator("[data-node=dc-half]");
  await card.waitFor();
  const uncordon = card.locator("button[data-control=cordon]");
  assert.ok(await uncordon.isDisabled(), "Uncordon, which the server refuses, is offered");
  assert.match(await uncordon.getAttribute("title"), /1 GPU\(s\) are not in container mode/);
  assert.equal(await card.locator("select[id$=-mode]").inputValue(), "container", "the way back is offered first");
  assert.match(await card.locator("table").textContent(), /vfio \(not the node's container mode\)/);
  page.clean();
});

test("web_a_node_whose_agent_stops_is_shown_lost", async () => {
  // An agent of our own: register, report once with a 1 s interval, then fall silent.
  const reg = await apiAs(fleet, fleet.admin, "/v1/nodes", { name: "lab-ghost", site: "lab", site_kind: "lab", platform: "linux", owner: "root" });
  assert.equal(reg.status, 201, JSON.stringify(reg.json));
  const agent = fleet.token("lab-ghost", "node", "lab-ghost");
  const hb = await apiAs(fleet, agent, "/v1/nodes/lab-ghost/heartbeat", { interval_s: 1, running: [] });
  assert.equal(hb.status, 200, JSON.stringify(hb.json));
  const page = await newPage();
  await signIn(page, fleet.admin);
  await go(page, "nodes");
  const card = page.locator("[data-node=lab-ghost]");
  await card.locator(".badge", { hasText: "lost" }).waitFor();
  const truth = (await apiAs(fleet, fleet.admin, "/v1/nodes/lab-ghost")).json;
  assert.equal(truth.unreachable, true);
  assert.match(await page.locator("[data-node=dc1-h200] .badge").first().textContent(), /reachable/);
  page.clean();
});

test("web_a_node_button_keeps_the_keyboard_focus_across_its_redraw", async () => {
  const reg = await apiAs(fleet, fleet.admin, "/v1/nodes", { name: "lab-focus", site: "lab", site_kind: "lab", platform: "linux", owner: "root" });
  assert.equal(reg.status, 201, JSON.stringify(reg.json));
  const page = await newPage();
  await signIn(page, fleet.admin);
  await go(page, "nodes");
  const card = page.locator("[data-node=lab-focus]");
  await card.locator("button[data-control=cordon]").focus();
  await page.keyboard.press("Enter");
  // The card is drawn again with Uncordon in Cordon's place: the focus is on it, not on the body.
  await card.locator("button[data-action=uncordon]").waitFor();
  await page.waitForFunction(() => document.activeElement && document.activeElement.dataset.control === "cordon");
  assert.equal(await page.evaluate(() => document.activeElement.closest("[data-node]").dataset.node), "lab-focus");
  await apiAs(fleet, fleet.admin, "/v1/nodes/lab-focus/uncordon", {});
  // A cordon that says why shows it on the node's card.
  await apiAs(fleet, fleet.admin, "/v1/nodes/lab-focus/cordon", { reason: "fan replaced <b>Tuesday</b>" });
  await card.locator("p.cordon").waitFor();
  assert.equal(await card.locator("p.cordon .reason").textContent(), "fan replaced <b>Tuesday</b>");
  await apiAs(fleet, fleet.admin, "/v1/nodes/lab-focus/uncordon", {});
  page.clean();
});

test("web_node_actions_appear_only_on_the_nodes_an_owner_owns", async () => {
  // An owner token naming two nodes, one of them owned by someone else: the server refuses
  // that one's actions, so the page does not offer them.
  for (const [name, owner] of [["lab-carol", "carol"], ["lab-root", "root"]]) {
    const reg = await apiAs(fleet, fleet.admin, "/v1/nodes", { name, site: "lab", site_kind: "lab", platform: "linux", owner });
    assert.equal(reg.status, 201, JSON.stringify(reg.json));
  }
  const carol = fleet.token("carol", "owner", "lab-carol,lab-root");
  const page = await newPage();
  await signIn(page, carol);
  await go(page, "nodes");
  await page.locator("[data-node=lab-carol] form.controls").waitFor();
  assert.equal(await page.locator("[data-node=lab-root] form.controls").count(), 0);
  page.clean();
});

test("web_a_hostile_node_name_is_shown_as_text", async () => {
  // The API refuses the name outright...
  const reg = await apiAs(fleet, fleet.admin, "/v1/nodes", { name: XSS, site: "lab", site_kind: "lab", platform: "linux", owner: "root" });
  assert.equal(reg.status, 400);
  // ...so to check the page's rendering, the real node list is answered with one node renamed.
  const page = await newPage();
  await page.route("**/v1/nodes", async (route) => {
    const res = await route.fetch();
    const body = await res.json();
    body.nodes[0].name = XSS;
    body.nodes[0].owner = XSS;
    if (body.nodes[0].devices[0]) body.nodes[0].devices[0].quarantined = XSS;
    await route.fulfill({ response: res, json: body });
  });
  await signIn(page, fleet.admin);
  await go(page, "nodes");
  await page.locator(".node h3 .name", { hasText: XSS }).waitFor();
  assert.equal(await page.locator("main img").count(), 0, "no element made from the name");
  assert.ok((await page.textContent("main")).includes(XSS));
  page.clean(); // no alert dialog, no request for "x"
});

test("web_every_page_passes_axe_and_is_screenshotted", async () => {
  for (const [label, viewport] of [["desktop", { width: 1440, height: 900 }], ["phone", { width: 390, height: 844 }]]) {
    const page = await newPage(viewport);
    await signIn(page, fleet.admin);
    for (const name of PAGES) {
      await go(page, name);
      await page.waitForFunction(() => !document.querySelector("main .status[data-kind=error]"));
      await page.waitForSelector({ capacity: "#capacity-charts figure", queue: "#queue-ended p, #queue-ended table", nodes: "[data-node]",
        events: "#events-list li", submit: "#f-class option" }[name], { state: "attached" });
      await page.screenshot({ path: join(SHOTS, `${name}-${label}.png`), fullPage: true });
      await page.evaluate(AXE);
      const res = await page.evaluate(() => window.axe.run(document, { runOnly: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"] }));
      const serious = res.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
      assert.deepEqual(serious.map((v) => `${name}/${label}: ${v.id}: ${v.nodes.map((n) => n.target.join(" ")).slice(0, 3).join(", ")}`), []);
    }
    // Keyboard: from a fresh load, Tab reaches the skip link, then the page links; Enter opens one.
    await page.reload();
    await page.waitForSelector("#nav:not([hidden])");
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement.className), "skip");
    await page.keyboard.press("Tab");
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement.getAttribute("href")), "#queue");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.title.startsWith("Queue"));
    page.clean();
  }
});

test("r10_a_mac_shows_its_apple_gpu_and_a_node_without_agent_is_not_green", async () => {
  const reg = await apiAs(fleet, fleet.admin, "/v1/nodes", { name: "lab-bare", site: "lab", site_kind: "lab", platform: "linux", owner: "root" });
  assert.equal(reg.status, 201, JSON.stringify(reg.json));
  const mac = (await apiAs(fleet, fleet.admin, "/v1/nodes/mac-m2")).json;
  assert.ok(mac.apple_unified_memory_gb > 0, JSON.stringify(mac));
  const page = await newPage();
  await signIn(page, fleet.admin);
  await go(page, "nodes");
  const card = page.locator("[data-node=mac-m2]");
  await card.locator("p", { hasText: "Apple GPU" }).waitFor();
  const text = await card.textContent();
  assert.ok(text.includes(`${mac.apple_unified_memory_gb} GB unified memory`), text);
  assert.ok(text.includes(mac.apple_gpu.class) && text.includes(mac.apple_gpu.state), text);
  assert.ok(!text.includes("No GPUs"), text);
  assert.equal(await page.locator("[data-node=lab-bare] .badge").first().getAttribute("data-kind"), "warn");
  page.clean();
});

test("web_a_server_out_of_reach_is_said_in_words", async () => {
  const page = await newPage();
  await signIn(page, fleet.admin);
  await go(page, "nodes");
  await page.locator("[data-node]").first().waitFor();
  await page.route("**/v1/nodes", (route) => route.abort("connectionrefused"));
  const note = page.locator("main .status[data-kind=error]");
  await note.waitFor();
  assert.equal((await note.textContent()).trim(), "The server cannot be reached.");
  page.bad.splice(0); // the browser logs the refused requests themselves
});

test("r9_an_owner_lifts_a_quarantine_from_the_nodes_page", async () => {
  // The demo's 4090 passes its checks: the node list is answered with it quarantined, and the
  // lift is answered by the real server (which says it is not quarantined: 409, shown).
  const page = await newPage();
  await page.route("**/v1/nodes", async (route) => {
    const res = await route.fetch();
    const body = await res.json();
    const n = body.nodes.find((x) => x.name === "lab-4090");
    if (n) n.devices[0].quarantined = "the device fell off the bus after reset 2";
    await route.fulfill({ response: res, json: body });
  });
  let sent = null;
  page.on("request", (r) => {
    if (r.url().endsWith("/v1/nodes/lab-4090/unquarantine")) sent = r.postDataJSON();
  });
  await signIn(page, fleet.admin);
  await go(page, "nodes");
  const card = page.locator("[data-node=lab-4090]");
  await card.locator(".reason", { hasText: "fell off the bus" }).waitFor();
  await card.locator("button[data-action=unquarantine]").click();
  await page.locator("main .status[data-kind=error]", { hasText: "is not quarantined" }).waitFor();
  assert.deepEqual(sent, { gpu: "0" });
  page.bad.splice(0); // the browser logs the 409 itself
});
