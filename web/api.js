// api.js: the API client: the token from sessionStorage as a bearer header, errors as sentences.
const KEY = "einsora.token";

export const token = {
  get: () => sessionStorage.getItem(KEY),
  set: (t) => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, code, message, data = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.data = data; // the whole error answer: some say where to go on (events' oldest, newest)
  }
}

// api("/v1/nodes") or api(path, {method: "POST", body: {...}, signal}).
export async function api(path, opts = {}) {
  const headers = { Authorization: `Bearer ${token.get() || ""}` };
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  let res;
  try {
    res = await fetch(path, {
      method: opts.method || "GET",
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      signal: opts.signal,
      cache: "no-store",
      credentials: "omit",
    });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    // The browser's own words ("Failed to fetch") say nothing to a person.
    throw new ApiError(0, "unreachable", "The server cannot be reached.");
  }
  let data = null;
  try {
    data = await res.json();
  } catch {
    throw new ApiError(res.status, "bad_answer", `The server answered ${res.status} without JSON.`);
  }
  if (!res.ok) throw new ApiError(res.status, data.code || "error", data.message || `HTTP ${res.status}`, data);
  return data;
}

// Every request a list filter names, page after page: a page ends at `limit`, and a busy site
// has more requests than one holds.
export async function requestsWhere(query) {
  const all = [];
  let after = null;
  do {
    const page = await api(`/v1/requests?${query}&limit=10000${after === null ? "" : `&after=${encodeURIComponent(after)}`}`);
    all.push(...page.requests);
    after = page.next ?? null;
  } while (after !== null);
  return all;
}

// The requests that are waiting, placed or running (never all history, which only grows).
export async function liveRequests() {
  const [pending, placed, active] = await Promise.all(["pending", "placed", "active"].map((s) => requestsWhere(`state=${s}`)));
  return [...pending, ...placed, ...active];
}

// Run fn now and every ms until stop() is called; a failed run shows on onError and goes on.
export function poll(fn, ms, onError) {
  let timer = null, stopped = false;
  const run = async () => {
    try {
      await fn();
    } catch (e) {
      if (!stopped && onError) onError(e);
    }
    if (!stopped) timer = setTimeout(run, ms);
  };
  run();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
