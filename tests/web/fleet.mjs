// fleet.mjs: start a real `einsora up --demo` (control plane + agents on the fixture machines)
// in a temporary directory, with extra user tokens, for the browser tests.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const SOURCE = resolve(here, "../..");
export const BIN = process.env.EINSORA_BIN || join(SOURCE, "build/test/src/cli/einsora");

function token(state, user, role, nodes) {
  const out = execFileSync(BIN, ["token", "create", "--state", state, "--user", user, "--role", role,
    ...(nodes ? ["--nodes", nodes] : []), "--json"]);
  return JSON.parse(out.toString()).token;
}

// Resolves to {url, admin, alice, bob, stop()} once the demo fleet reports.
export async function startFleet() {
  const dir = mkdtempSync(join(tmpdir(), "einsora-web-"));
  const state = join(dir, "state.db");
  const tokens = { alice: token(state, "alice", "user"), bob: token(state, "bob", "user") };
  const child = spawn(BIN, ["up", "--demo", "--no-local", "--listen", "127.0.0.1:0", "--state", state, "--heartbeat", "1"], {
    env: { ...process.env, HOME: dir, XDG_STATE_HOME: join(dir, "xdg") },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const up = await new Promise((res, rej) => {
    const deadline = setTimeout(() => rej(new Error(`einsora up did not come up:\n${out}`)), 120000);
    child.on("exit", (c) => rej(new Error(`einsora up exited ${c}:\n${out}`)));
    const check = () => {
      const m = out.match(/control plane\s+(http:\/\/\S+)/), t = out.match(/your token\s+(\S+)/);
      if (m && t && out.includes("Press Ctrl-C")) {
        clearTimeout(deadline);
        res({ url: m[1], tokenFile: t[1] });
      } else setTimeout(check, 100);
    };
    check();
  });
  const admin = readFileSync(up.tokenFile, "utf8").trim();
  return {
    url: up.url, admin, ...tokens, log: () => out,
    token: (user, role, nodes) => token(state, user, role, nodes),
    stop: () => new Promise((res) => {
      child.removeAllListeners("exit");
      child.on("exit", () => {
        rmSync(dir, { recursive: true, force: true });
        res();
      });
      child.kill("SIGTERM");
    }),
  };
}

// The API as a token sees it (the tests' ground truth).
export async function apiAs(fleet, tok, path, body) {
  const res = await fetch(fleet.url + path, {
    method: body === undefined ? "GET" : "POST",
    headers: { Authorization: `Bearer ${tok}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, json: await res.json() };
}

// Poll fn until it returns a truthy value; generous deadline, no fixed sleeps.
export async function until(what, fn, ms = 60000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
