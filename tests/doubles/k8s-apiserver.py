#!/usr/bin/env python3
"""k8s-apiserver.py: a Kubernetes API server double for Einsora's tests (no real one can run here).

It serves, on 127.0.0.1, the real REST paths, verbs, status codes and Status bodies for nodes,
pods, pods/eviction, poddisruptionbudgets (policy/v1), KubeVirt virtualmachineinstances and the
KubeVirt CR (kubevirt.io/v1): one global resourceVersion, list pages (limit/continue), watch
streams (ADDED/MODIFIED/DELETED, BOOKMARK with allowWatchBookmarks, ERROR 410 for a version older
than the last compaction), merge patches (application/merge-patch+json only), bearer tokens
(401) and RBAC denials (403). Bodies that do not have the real API's shape are refused.

It emulates the NVIDIA GPU Operator: when a node's nvidia.com/gpu.workload.config label changes,
the old GPU resource leaves status.allocatable at once and, --operator-delay seconds later, the
new one appears (nvidia.com/gpu in container mode, nvidia.com/<DEVICE> in vm-passthrough).

Test controls (no token) under /_double/: POST compact (every open watch ends with 410 and older
versions are gone), POST rbac {"deny": [[verb, resource], ...]}, POST operator {"converge": bool,
"delay": s}, POST throttle {"count": n} (the next n API calls get 429), POST hang {"verb": v,
"count": n, "seconds": s} (the next n calls of verb v get no answer for s seconds, then none
at all: the connection closes), POST phase {"plural", "namespace", "name", "phase"} (a Pod's or
VMI's status.phase, as a kubelet sets it when the workload exits), GET log (calls seen).

Usage: k8s-apiserver.py --cluster FILE.json --token T [--port-file F] [--operator-delay S]
"""
import argparse
import base64
import copy
import json
import re
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE_LABEL = "nvidia.com/gpu.workload.config"
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")

# (group, version, plural) -> kind, namespaced
RESOURCES = {
    ("", "v1", "nodes"): ("Node", False),
    ("", "v1", "pods"): ("Pod", True),
    ("policy", "v1", "poddisruptionbudgets"): ("PodDisruptionBudget", True),
    ("kubevirt.io", "v1", "virtualmachineinstances"): ("VirtualMachineInstance", True),
    ("kubevirt.io", "v1", "kubevirts"): ("KubeVirt", True),
}


class Cluster:
    def __init__(self, data, token, operator_delay):
        self.lock = threading.Condition()
        self.rv = 1
        self.compacted = 0
        self.epoch = 0  # bumped by compact: open watches end with 410
        self.token = token
        self.deny = set()
        self.throttle = 0
        self.hang = {"verb": "", "count": 0, "seconds": 0}
        self.converge = True
        self.operator_delay = operator_delay
        self.objects = {}  # plural -> {(ns, name): obj}
        self.events = []  # (rv, plural, type, obj)
        self.log = []
        self.gpus = {}  # node -> {"count", "device"}
        for plural in ("nodes", "pods", "poddisruptionbudgets", "virtualmachineinstances", "kubevirts"):
            self.objects[plural] = {}
        with self.lock:
            for n in data.get("nodes", []):
                gpu = n.pop("x-gpus", None)
                if gpu:
                    self.gpus[n["metadata"]["name"]] = gpu
                self.store("nodes", n)
            for plural in ("pods", "poddisruptionbudgets", "virtualmachineinstances", "kubevirts"):
                for o in data.get(plural, []):
                    self.store(plural, o)

    def bump(self):
        self.rv += 1
        return str(self.rv)

    def store(self, plural, obj, etype="ADDED"):
        md = obj.setdefault("metadata", {})
        md["resourceVersion"] = self.bump()
        md.setdefault("uid", str(uuid.uuid4()))
        md.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        kind, namespaced = [v for k, v in RESOURCES.items() if k[2] == plural][0]
        if namespaced:
            md.setdefault("namespace", "default")
        key = (md.get("namespace", ""), md["name"])
        self.objects[plural][key] = obj
        self.events.append((self.rv, plural, etype, copy.deepcopy(obj)))
        self.lock.notify_all()

    def remove(self, plural, key):
        obj = self.objects[plural].pop(key)
        obj["metadata"]["resourceVersion"] = self.bump()
        self.events.append((self.rv, plural, "DELETED", copy.deepcopy(obj)))
        self.lock.notify_all()
        return obj

    # --- the GPU Operator ---------------------------------------------------------------
    def gpu_resource(self, node, mode):
        g = self.gpus.get(node)
        if not g:
            return None
        return "nvidia.com/gpu" if mode == "container" else "nvidia.com/" + g["device"]

    def relabelled(self, name, old, new):
        node = self.objects["nodes"].get(("", name))
        if not node or name not in self.gpus:
            return
        old_res = self.gpu_resource(name, old or "container")
        st = node.setdefault("status", {})
        for field in ("allocatable", "capacity"):
            st.setdefault(field, {}).pop(old_res, None)
        self.store("nodes", node, "MODIFIED")
        if self.converge:
            t = threading.Timer(self.operator_delay, self.operator_converge, args=(name, new))
            t.daemon = True
            t.start()

    def operator_converge(self, name, mode):
        with self.lock:
            node = self.objects["nodes"].get(("", name))
            if not node or node["metadata"].get("labels", {}).get(MODE_LABEL, "container") != mode:
                return
            res = self.gpu_resource(name, mode)
            st = node.setdefault("status", {})
            for field in ("allocatable", "capacity"):
                st.setdefault(field, {})[res] = str(self.gpus[name]["count"])
            self.store("nodes", node, "MODIFIED")


def status(code, reason, message, details=None):
    s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
         "reason": reason, "code": code}
    if details:
        s["details"] = details
    return s


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None):
        super().__init__(message)
        self.body = status(code, reason, message, details)
        self.code = code


def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def bad(message):
    raise ApiError(400, "BadRequest", message)


def invalid(kind, name, message):
    raise ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (kind, name, message))


def check_meta(obj, kind, allowed_top):
    if not isinstance(obj, dict):
        bad("the body must be a JSON object")
    for k in obj:
        if k not in allowed_top:
            bad('strict decoding error: unknown field "%s"' % k)
    md = obj.get("metadata", {})
    if not isinstance(md, dict):
        bad("metadata must be an object")
    labels = md.get("labels", {})
    if labels is None:
        labels = {}
    if not isinstance(labels, dict):
        bad("metadata.labels must be an object")
    for k, v in labels.items():
        if v is not None and (not isinstance(v, str) or len(v) > 63 or not LABEL_VALUE.match(v)):
            invalid(kind, md.get("name", ""), 'metadata.labels: Invalid value: "%s": a valid label value' % v)


def check_node_patch(p):
    check_meta(p, "Node", {"apiVersion", "kind", "metadata", "spec", "status"})
    spec = p.get("spec", {})
    if spec is not None and not isinstance(spec, dict):
        bad("spec must be an object")
    if spec and "unschedulable" in spec and not isinstance(spec["unschedulable"], (bool, type(None))):
        bad("json: cannot unmarshal %s into Go struct field NodeSpec.spec.unschedulable of type bool"
            % type(spec["unschedulable"]).__name__)


def check_pod(p, ns):
    check_meta(p, "Pod", {"apiVersion", "kind", "metadata", "spec", "status"})
    if p.get("apiVersion") != "v1" or p.get("kind") != "Pod":
        bad("the body must be a v1 Pod")
    name = p.get("metadata", {}).get("name")
    if not isinstance(name, str) or not DNS_NAME.match(name):
        invalid("Pod", str(name), "metadata.name: Required value or invalid DNS name")
    spec = p.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list) or not spec["containers"]:
        invalid("Pod", name, "spec.containers: Required value")
    for c in spec["containers"]:
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not isinstance(c.get("image"), str):
            invalid("Pod", name, "spec.containers[0]: name and image are required")
        lim = c.get("resources", {}).get("limits", {})
        if not isinstance(lim, dict) or any(not isinstance(v, (str, int)) for v in lim.values()):
            bad("resources.limits must map names to quantities")
    for k in ("nodeName", "runtimeClassName"):
        if k in spec and not isinstance(spec[k], str):
            bad("spec.%s must be a string" % k)


def check_vmi(v):
    check_meta(v, "VirtualMachineInstance", {"apiVersion", "kind", "metadata", "spec", "status"})
    if v.get("apiVersion") != "kubevirt.io/v1" or v.get("kind") != "VirtualMachineInstance":
        bad("the body must be a kubevirt.io/v1 VirtualMachineInstance")
    name = v.get("metadata", {}).get("name")
    if not isinstance(name, str) or not DNS_NAME.match(name):
        invalid("VirtualMachineInstance", str(name), "metadata.name: Required value")
    dom = v.get("spec", {}).get("domain")
    if not isinstance(dom, dict):
        invalid("VirtualMachineInstance", name, "spec.domain: Required value")
    for g in dom.get("devices", {}).get("gpus", []):
        if not isinstance(g, dict) or not isinstance(g.get("name"), str) or not isinstance(g.get("deviceName"), str):
            invalid("VirtualMachineInstance", name, "spec.domain.devices.gpus: name and deviceName are required")


def check_pdb(p):
    check_meta(p, "PodDisruptionBudget", {"apiVersion", "kind", "metadata", "spec", "status"})
    if p.get("apiVersion") != "policy/v1" or p.get("kind") != "PodDisruptionBudget":
        bad("the body must be a policy/v1 PodDisruptionBudget")
    name = p.get("metadata", {}).get("name")
    if not isinstance(name, str) or not DNS_NAME.match(name):
        invalid("PodDisruptionBudget", str(name), "metadata.name: Required value")
    spec = p.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("selector", {}).get("matchLabels"), dict):
        invalid("PodDisruptionBudget", name, "spec.selector: Required value")
    if not isinstance(spec.get("minAvailable"), int):
        invalid("PodDisruptionBudget", name, "spec.minAvailable: the double supports integer minAvailable only")


def check_kubevirt_patch(p):
    check_meta(p, "KubeVirt", {"apiVersion", "kind", "metadata", "spec", "status"})
    phd = p.get("spec", {}).get("configuration", {}).get("permittedHostDevices")
    if phd is None:
        return
    if not isinstance(phd, dict):
        bad("permittedHostDevices must be an object")
    for d in phd.get("pciHostDevices") or []:
        if not isinstance(d, dict) or not isinstance(d.get("pciVendorSelector"), str) or \
                not isinstance(d.get("resourceName"), str):
            invalid("KubeVirt", "kubevirt", "pciHostDevices: pciVendorSelector and resourceName are required")
        if not re.match(r"^[0-9A-Fa-f]{4}:[0-9A-Fa-f]{4}$", d["pciVendorSelector"]):
            invalid("KubeVirt", "kubevirt", "pciVendorSelector must be VVVV:DDDD")
        if "externalResourceProvider" in d and not isinstance(d["externalResourceProvider"], bool):
            bad("externalResourceProvider must be a boolean")


def parse_path(path):
    """-> (group, version, ns, plural, name, sub) or None."""
    seg = [s for s in path.split("/") if s]
    if len(seg) >= 2 and seg[0] == "api":
        group, version, rest = "", seg[1], seg[2:]
    elif len(seg) >= 3 and seg[0] == "apis":
        group, version, rest = seg[1], seg[2], seg[3:]
    else:
        return None
    ns = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        ns, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    return group, version, ns, rest[0], rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None


def labelled(obj, selector):
    labels = obj.get("metadata", {}).get("labels", {}) or {}
    for term in [t for t in selector.split(",") if t]:
        k, eq, v = term.partition("=")
        if (eq and labels.get(k) != v) or (not eq and k not in labels):
            return False
    return True


def selected(obj, fields):
    for f in fields:
        k, _, v = f.partition("=")
        cur = obj
        for part in k.split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        if (cur or "") != v:
            return False
    return True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    cluster = None

    def log_message(self, fmt, *args):
        pass

    def send_json(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if code == 429:
            self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        try:
            return json.loads(self.raw) if self.raw else None
        except ValueError as e:
            bad("the body is not JSON: %s" % e)

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def do_PUT(self):
        self.dispatch("PUT")

    def dispatch(self, method):
        # read the whole body first: an answer given before it is read would leave it on a
        # kept-alive connection
        n = int(self.headers.get("Content-Length") or 0)
        self.raw = self.rfile.read(n) if n else b""
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        c = self.cluster
        try:
            if url.path.startswith("/_double/"):
                return self.control(method, url.path[len("/_double/"):])
            auth = self.headers.get("Authorization", "")
            if auth != "Bearer " + c.token:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            p = parse_path(url.path)
            if not p or (p[0], p[1], p[3]) not in RESOURCES:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            group, version, ns, plural, name, sub = p
            kind, namespaced = RESOURCES[(group, version, plural)]
            watch = q.get("watch") in ("1", "true")
            verb = {"GET": "watch" if watch else ("get" if name else "list"), "POST": "create", "PATCH": "patch",
                    "DELETE": "delete", "PUT": "update"}[method]
            resource = plural + ("/" + sub if sub else "")
            with c.lock:
                self.entry = {"verb": verb, "resource": resource, "name": name or "", "namespace": ns or ""}
                c.log.append(self.entry)
                if (verb, resource) in c.deny:
                    raise ApiError(403, "Forbidden", '%s "%s" is forbidden: User "system:serviceaccount:einsora:'
                                   'einsora-sync" cannot %s resource "%s" in API group "%s"%s'
                                   % (resource, name or "", verb, resource, group,
                                      " at the cluster scope" if not ns else ' in the namespace "%s"' % ns))
                if c.throttle > 0:
                    c.throttle -= 1
                    raise ApiError(429, "TooManyRequests", "Too many requests, please try again later.")
                hang = c.hang["count"] > 0 and c.hang["verb"] == verb
                if hang:
                    c.hang["count"] -= 1
            if hang:  # outside the lock: everyone else is served meanwhile
                time.sleep(c.hang["seconds"])
                self.close_connection = True
                return
            if namespaced is False and ns:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            if watch:
                return self.watch(plural, ns, q)
            with c.lock:
                self.route(method, plural, kind, ns, name, sub, q)
        except ApiError as e:
            self.send_json(e.code, e.body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def route(self, method, plural, kind, ns, name, sub, q):
        c = self.cluster
        objs = c.objects[plural]
        if sub == "eviction" and plural == "pods" and method == "POST":
            return self.evict(ns, name)
        if sub:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        key = (ns or "", name) if kind == "Node" else (ns, name)
        if method == "GET" and not name:
            return self.list(plural, kind, ns, q)
        if method == "POST" and not name:
            obj = self.body()
            if plural == "pods":
                check_pod(obj, ns)
            elif plural == "virtualmachineinstances":
                check_vmi(obj)
            elif plural == "poddisruptionbudgets":
                check_pdb(obj)
            else:
                raise ApiError(405, "MethodNotAllowed", "create is not supported here by the double")
            obj["metadata"]["namespace"] = ns
            if (ns, obj["metadata"]["name"]) in objs:
                raise ApiError(409, "AlreadyExists", '%s "%s" already exists' % (plural, obj["metadata"]["name"]),
                               {"name": obj["metadata"]["name"], "kind": plural})
            obj["status"] = {"phase": "Pending"} if plural != "poddisruptionbudgets" else {}
            c.store(plural, obj)
            t = threading.Timer(0.2, self.run_workload, args=(plural, (ns, obj["metadata"]["name"])))
            t.daemon = True
            t.start()
            return self.send_json(201, obj)
        if not name or key not in objs:
            raise ApiError(404, "NotFound", '%s "%s" not found' % (plural, name),
                           {"name": name, "kind": plural})
        obj = objs[key]
        if method == "GET":
            return self.send_json(200, obj)
        if method == "DELETE":
            return self.send_json(200, c.remove(plural, key))
        if method == "PATCH":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if ctype != "application/merge-patch+json":
                raise ApiError(415, "UnsupportedMediaType",
                               '415: Unsupported Media Type "%s"' % ctype)
            patch = self.body()
            if plural == "nodes":
                check_node_patch(patch)
            elif plural == "kubevirts":
                check_kubevirt_patch(patch)
            else:
                raise ApiError(405, "MethodNotAllowed", "patch is not supported here by the double")
            want = patch.get("metadata", {}).get("resourceVersion") if isinstance(patch.get("metadata"), dict) else None
            if want and want != obj["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": the object has been '
                               'modified; please apply your changes to the latest version and try again'
                               % (plural, name))
            old_mode = obj.get("metadata", {}).get("labels", {}).get(MODE_LABEL)
            new = merge_patch(obj, patch)
            new["metadata"]["name"] = name
            objs[key] = new
            c.store(plural, new, "MODIFIED")
            if plural == "nodes":
                new_mode = new["metadata"].get("labels", {}).get(MODE_LABEL)
                if new_mode != old_mode:
                    self.entry["label"] = new_mode
                    c.relabelled(name, old_mode, new_mode)
            return self.send_json(200, objs[key])
        raise ApiError(405, "MethodNotAllowed", "method not allowed")

    def run_workload(self, plural, key):
        c = self.cluster
        with c.lock:
            obj = c.objects[plural].get(key)
            if obj and obj.get("status", {}).get("phase") == "Pending":
                obj["status"]["phase"] = "Running"
                if plural == "virtualmachineinstances":
                    sel = obj["spec"].get("nodeSelector", {}).get("kubernetes.io/hostname")
                    if sel:
                        obj["status"]["nodeName"] = sel
                c.store(plural, obj, "MODIFIED")

    def list(self, plural, kind, ns, q):
        c = self.cluster
        fields = [f for f in q.get("fieldSelector", "").split(",") if f]
        items = [o for (ons, _), o in sorted(c.objects[plural].items()) if (ns is None or ons == ns)
                 and selected(o, fields) and labelled(o, q.get("labelSelector", ""))]
        start, rv = 0, str(c.rv)
        if q.get("continue"):
            try:
                tok = json.loads(base64.b64decode(q["continue"]))
                start, rv = int(tok["start"]), tok["rv"]
            except (ValueError, KeyError, TypeError):
                bad("invalid continue token")
            if int(rv) < c.compacted:
                raise ApiError(410, "Expired", "The provided continue parameter is too old to display a "
                               "consistent list result. You can start a new list without the continue parameter.")
        limit = int(q.get("limit") or 0) or len(items) or 1
        page = items[start:start + limit]
        md = {"resourceVersion": rv}
        if start + limit < len(items):
            md["continue"] = base64.b64encode(json.dumps({"start": start + limit, "rv": rv}).encode()).decode()
        group_version = [("%s/%s" % (g, v) if g else v) for (g, v, p) in RESOURCES if p == plural][0]
        self.send_json(200, {"kind": kind + "List", "apiVersion": group_version, "metadata": md, "items": page})

    def evict(self, ns, name):
        c = self.cluster
        body = self.body()
        if not isinstance(body, dict) or body.get("apiVersion") != "policy/v1" or body.get("kind") != "Eviction":
            bad("the body must be a policy/v1 Eviction")
        if not isinstance(body.get("metadata"), dict) or body["metadata"].get("name") != name:
            bad("name in URL does not match name in Eviction object")
        for k in body:
            if k not in ("apiVersion", "kind", "metadata", "deleteOptions"):
                bad('strict decoding error: unknown field "%s"' % k)
        pod = c.objects["pods"].get((ns, name))
        if not pod:
            raise ApiError(404, "NotFound", 'pods "%s" not found' % name, {"name": name, "kind": "pods"})
        labels = pod["metadata"].get("labels", {})
        for (pns, pname), pdb in sorted(c.objects["poddisruptionbudgets"].items()):
            sel = pdb.get("spec", {}).get("selector", {}).get("matchLabels", {})
            if pns != ns or not sel or any(labels.get(k) != v for k, v in sel.items()):
                continue
            healthy = sum(1 for (ons, _), o in c.objects["pods"].items() if ons == ns and
                          all(o["metadata"].get("labels", {}).get(k) == v for k, v in sel.items()) and
                          o.get("status", {}).get("phase") == "Running")
            need = pdb["spec"].get("minAvailable", 0)
            if healthy - 1 < need:
                raise ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's "
                               "disruption budget.",
                               {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget %s "
                                            "needs %d healthy pods and has %d currently" % (pname, need, healthy)}]})
        c.remove("pods", (ns, name))
        self.send_json(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                             "code": 201})

    def watch(self, plural, ns, q):
        c = self.cluster
        try:
            since = int(q.get("resourceVersion") or "0")
            timeout = min(float(q.get("timeoutSeconds") or 1800), 1800)
        except ValueError:
            raise ApiError(400, "BadRequest", "invalid resourceVersion or timeoutSeconds")
        bookmarks = q.get("allowWatchBookmarks") == "true"
        fields = [f for f in q.get("fieldSelector", "").split(",") if f]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def send(obj):
            data = (json.dumps(obj) + "\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        end = time.monotonic() + timeout
        with c.lock:
            epoch = c.epoch
            gone = since < c.compacted
        if gone:
            send({"type": "ERROR", "object": status(410, "Expired", "too old resource version: %d (%d)"
                                                     % (since, c.compacted))})
        else:
            last_bookmark = time.monotonic()
            while time.monotonic() < end:
                with c.lock:
                    if c.epoch != epoch:
                        out = [{"type": "ERROR", "object": status(410, "Expired", "too old resource version: "
                                                                  "%d (%d)" % (since, c.compacted))}]
                        since = None
                    else:
                        out = [{"type": t, "object": o} for (rv, p, t, o) in c.events
                               if rv > since and p == plural and (ns is None or o["metadata"].get("namespace") == ns)
                               and selected(o, fields)]
                        since = c.rv
                        if not out and not (bookmarks and time.monotonic() - last_bookmark > 1.0):
                            c.lock.wait(min(0.5, max(0.01, end - time.monotonic())))
                            continue
                if not out and bookmarks:
                    kind = [v[0] for k, v in RESOURCES.items() if k[2] == plural][0]
                    out = [{"type": "BOOKMARK", "object": {"kind": kind, "metadata": {"resourceVersion": str(since)}}}]
                    last_bookmark = time.monotonic()
                for e in out:
                    send(e)
                if since is None:
                    break
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def control(self, method, what):
        c = self.cluster
        body = self.body() if method == "POST" else None
        with c.lock:
            if what == "compact":
                c.compacted = c.rv + 1
                c.bump()
                c.epoch += 1
                c.lock.notify_all()
            elif what == "rbac":
                c.deny = {tuple(d) for d in body.get("deny", [])}
            elif what == "operator":
                c.converge = body.get("converge", c.converge)
                c.operator_delay = body.get("delay", c.operator_delay)
            elif what == "throttle":
                c.throttle = int(body.get("count", 0))
            elif what == "hang":
                c.hang = {"verb": body.get("verb", ""), "count": int(body.get("count", 0)),
                          "seconds": float(body.get("seconds", 0))}
            elif what == "phase":  # as a kubelet writes it when the container exits
                plural, ns, name = body.get("plural", "pods"), body.get("namespace"), body.get("name")
                obj = c.objects[plural].get((ns, name))
                if not obj:
                    raise ApiError(404, "NotFound", "no %s %s/%s" % (plural, ns, name))
                obj.setdefault("status", {})["phase"] = body.get("phase", "Succeeded")
                c.store(plural, obj, "MODIFIED")
            elif what == "log":
                return self.send_json(200, c.log)
            else:
                raise ApiError(404, "NotFound", "no such control")
        self.send_json(200, {"ok": True})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cluster", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--port-file")
    ap.add_argument("--operator-delay", type=float, default=1.0)
    a = ap.parse_args()
    with open(a.cluster) as f:
        data = json.load(f)
    Handler.cluster = Cluster(data, a.token, a.operator_delay)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    port = srv.server_address[1]
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write("%d\n" % port)
        import os
        os.rename(a.port_file + ".tmp", a.port_file)
    print(port, flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
