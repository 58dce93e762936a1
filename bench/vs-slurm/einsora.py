"""einsora.py: an Einsora control plane and one agent per fake node, for bench/vs-slurm.

The agents run `einsora agent run --simulate` on the fixture machines with the fake NVML (as
the fleet tests do): 8 GPUs per node, the HGX H100 fixture as it is and a copy of it whose
devices say H200. A placement counts as running when its agent made it `active`; the bench
releases it 2 s later (the job's hold). The submitting user owns the nodes (no stranger's
container, so no Kata needed, R2b), as Slurm's jobs run as the cluster's own user. Times come from the event feed (ms, the server's
clock); every process is started here and stopped by its PID.
"""
import heapq
import http.client
import json
import os
import queue
import shutil
import socket
import subprocess
import threading
import time

import procs


def make_h200_fixture(src, dst):
    """The HGX H100 fixture with its GPUs turned into H200s (PCI 10de:2335, NVML name)."""
    shutil.copytree(src, dst, symlinks=True)
    for dirpath, _, files in os.walk(os.path.join(dst, "sys")):
        for f in files:
            p = os.path.join(dirpath, f)
            if f == "device" and not os.path.islink(p):
                with open(p) as fh:
                    v = fh.read().strip()
                if v == "0x2330":
                    with open(p, "w") as fh:
                        fh.write("0x2335\n")
    nv = os.path.join(dst, "nvml.txt")
    with open(nv) as fh:
        text = fh.read()
    with open(nv, "w") as fh:
        fh.write(text.replace("0x233010DE", "0x233510DE").replace("NVIDIA H100 80GB HBM3", "NVIDIA H200"))


RELEASERS = 16  # threads releasing held requests, each with its own connection


class Api:
    """One keep-alive HTTP/1.1 connection (one per thread), spoken over a plain socket.

    The bench shares the machine's two cores with the fleet it measures, and its own CPU per
    job was as large as the control plane's; http.client parses each answer's headers through
    the email package, which cost more than the rest of a call. The control plane answers with
    Content-Length (chunked answers are read too)."""

    def __init__(self, port, token):
        self.port = port
        self.head = "Host: 127.0.0.1\r\nAuthorization: Bearer %s\r\n" % token
        self.sock, self.buf = None, b""

    def _connect(self):
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=120)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def _close(self):
        if self.sock:
            self.sock.close()
        self.sock, self.buf = None, b""

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the control plane closed the connection")
        self.buf += chunk

    def _take(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def _answer(self):
        """(status, body bytes, whether the server closes the connection)."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        length, chunked, close = 0, False, False
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            k, v = k.strip().lower(), v.strip().lower()
            if k == b"content-length":
                length = int(v)
            elif k == b"transfer-encoding":
                chunked = b"chunked" in v
            elif k == b"connection":
                close = v == b"close"
        if not chunked:
            return status, self._take(length), close
        body = b""
        while True:
            n = int(self._line().split(b";")[0], 16)
            if n == 0:
                while self._line():  # trailers, then the empty line
                    pass
                return status, body, close
            body += self._take(n)
            self._take(2)

    def call(self, method, path, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        req = ("%s %s HTTP/1.1\r\n%s%sContent-Length: %d\r\n\r\n"
               % (method, path, self.head, "Content-Type: application/json\r\n" if data else "",
                  len(data))).encode() + data
        for attempt in range(3):
            try:
                if not self.sock:
                    self._connect()
                self.sock.sendall(req)
                status, text, close = self._answer()
                if close:
                    self._close()
                return status, (json.loads(text) if text else None)
            except OSError:  # the connection dropped (ConnectionError is one): a new one
                self._close()
                if attempt == 2:
                    raise


class EinsoraFleet:
    def __init__(self, root, binary, catalog, fixtures, fake_nvml, types, nodes_per_type, heartbeat_s):
        self.root, self.binary, self.catalog = root, binary, catalog
        self.fixtures, self.fake_nvml = fixtures, fake_nvml
        self.types, self.nodes_per_type, self.heartbeat_s = types, nodes_per_type, heartbeat_s
        self.procs = []
        self.state = os.path.join(root, "einsora.db")
        os.makedirs(os.path.join(root, "log"), exist_ok=True)

    def _token(self, user, role, nodes=None):
        argv = [self.binary, "token", "create", "--state", self.state, "--user", user, "--role", role]
        if nodes:
            argv += ["--nodes", nodes]
        out = subprocess.run(argv, capture_output=True, text=True, check=True)
        return out.stdout.strip().split()[-1]

    def _spawn(self, name, argv, env=None):
        log = open(os.path.join(self.root, "log", name + ".log"), "ab")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=env or os.environ)
        self.procs.append((name, p))
        return p

    def start(self):
        self.admin = self._token("bench", "admin")
        port_file = os.path.join(self.root, "port")
        self._spawn("server", [self.binary, "serve", "--listen", "127.0.0.1:0", "--state", self.state,
                               "--port-file", port_file, "--catalog", self.catalog])
        for _ in range(600):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.05)
        self.port = int(open(port_file).read().strip())
        url = "http://127.0.0.1:%d" % self.port
        h200 = os.path.join(self.root, "h200-fixture")
        if not os.path.exists(h200):
            make_h200_fixture(os.path.join(self.fixtures, "hgx-h100-8gpu"), h200)
        machine = {self.types[0][0]: os.path.join(self.fixtures, "hgx-h100-8gpu"), self.types[1][0]: h200}
        self.nodes = []
        for t, _ in self.types:
            for i in range(self.nodes_per_type):
                name = "%s-%02d" % (t, i + 1)
                self.nodes.append(name)
                state_dir = os.path.join(self.root, "agent-" + name)
                os.makedirs(state_dir, exist_ok=True)
                m = machine[t]
                env = dict(os.environ, EINSORA_TOKEN=self._token(name, "node", name),
                           EINSORA_FAKE_NVML=os.path.join(m, "nvml.txt"))
                self._spawn("agent-" + name, [
                    self.binary, "agent", "run", "--server", url, "--name", name, "--owner", "bench",
                    "--heartbeat", str(self.heartbeat_s), "--state-dir", state_dir, "--catalog", self.catalog,
                    "--site", "dc1", "--site-kind", "datacenter", "--mode", "container",
                    "--sysfs-root", os.path.join(m, "sys"), "--proc-root", os.path.join(m, "proc"),
                    "--simulate", "--nvml-lib", self.fake_nvml], env=env)
        api = Api(self.port, self.admin)
        deadline = time.time() + 120
        while time.time() < deadline:
            st, j = api.call("GET", "/v1/nodes")
            if st == 200 and sum(1 for n in j["nodes"] if n.get("agent")) >= len(self.nodes):
                return
            time.sleep(0.2)
        raise RuntimeError("the agents did not all register; see %s/log" % self.root)

    def submit(self, api, gpus, cls):
        st, j = api.call("POST", "/v1/requests", {"kind": "container", "class": cls, "count": gpus})
        if st != 201:
            raise RuntimeError("submit: %s %s" % (st, j))
        return j["id"]

    def run_holds(self, n_jobs, hold_s, stop):
        """Follow the event feed; release each request hold_s after it became active (its
        `request.active` event's time: a job that runs hold_s from its start, as Slurm's
        `sleep`). Returns {id: {"submitted", "placed", "active", "ended", ...}} (epoch seconds)
        once n_jobs ended, with "node", "active seen" (when the feed showed it here) and
        "release sent" (when its release left) for the bench's own latency."""
        feed = Api(self.port, self.admin)
        jobs = {}
        due = []  # a heap of (release time, id)
        cond = threading.Condition()
        errors = []
        ended = 0
        done = threading.Event()

        ready = queue.SimpleQueue()  # ids whose hold ended, for the releasers

        def timer():
            # One thread watches the clock and hands each id over when its hold ends, so the
            # releasers block on the queue: no herd of them waking at every deadline to find
            # that one of them got the id (that herd took the CPU the fleet needed).
            while True:
                with cond:
                    while not done.is_set() and (not due or due[0][0] > time.time()):
                        cond.wait(timeout=max(0.0, due[0][0] - time.time()) if due else None)
                    if done.is_set():
                        break
                    _, rid = heapq.heappop(due)
                    jobs[rid]["release sent"] = time.time()
                ready.put(rid)
            for _ in range(RELEASERS):
                ready.put(None)

        def releaser():
            # Several at once: releases that fall due together (a wave of jobs activated in
            # one batch) leave together rather than queue behind one another's round trip,
            # which would lengthen their holds and the makespan.
            rel = Api(self.port, self.admin)
            while True:
                rid = ready.get()
                if rid is None:
                    return
                try:
                    st, _ = rel.call("POST", "/v1/requests/%d/release" % rid)
                    if st != 200:
                        raise RuntimeError("release %d: %s" % (rid, st))
                except Exception as e:  # reported below, the run fails
                    errors.append(e)
                    return

        threads = [threading.Thread(target=releaser, daemon=True) for _ in range(RELEASERS)]
        threads.append(threading.Thread(target=timer, daemon=True))
        for th in threads:
            th.start()
        after = 0
        kinds = {"request.submitted": "submitted", "request.placed": "placed", "request.active": "active",
                 "request.released": "ended"}
        while ended < n_jobs and not stop() and not errors:
            st, j = feed.call("GET", "/v1/events?after=%d&wait=10&limit=10000" % after)
            if st != 200:
                raise RuntimeError("events: %s %s" % (st, j))
            for e in j["events"]:
                if e["type"] == "request.refused":
                    raise RuntimeError("request %s refused: %s" % (e["object"], e["data"].get("reason")))
                k = kinds.get(e["type"])
                if not k:
                    continue
                rid = int(e["object"])
                with cond:
                    rec = jobs.setdefault(rid, {})
                    rec.setdefault(k, e["time_ms"] / 1000.0)
                    if k == "placed":
                        rec["node"] = (e.get("data") or {}).get("placement", {}).get("node")
                    elif k == "active":
                        rec["active seen"] = time.time()
                        heapq.heappush(due, (rec["active"] + hold_s, rid))
                        cond.notify()
                    elif k == "ended":
                        ended += 1
            after = j["next"]
        with cond:
            done.set()
            cond.notify_all()
        for th in threads:
            th.join()
        if errors:
            raise errors[0]
        return jobs

    def metrics_text(self):
        """The control plane's /metrics (text), for --dump."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("GET", "/metrics", headers={"Authorization": "Bearer " + self.admin})
            return conn.getresponse().read().decode()
        finally:
            conn.close()

    def cpu_s(self):
        """CPU seconds (user + system) the control plane and the agents have used so far."""
        tick = os.sysconf("SC_CLK_TCK")
        out = {"server": 0.0, "agents": 0.0}
        for name, p in self.procs:
            try:
                with open("/proc/%d/stat" % p.pid) as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # after the name: state is field 3, utime 14, stime 15 (proc(5))
            out["server" if name == "server" else "agents"] += (int(fields[11]) + int(fields[12])) / tick
        return out

    def stop(self):
        procs.stop_all(self.procs, timeout=30)
