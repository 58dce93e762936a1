#!/usr/bin/env bash
# k8s-demo.sh: the datacenter against the Kubernetes API-server double, as a terminal session:
# the nodes and capacity built from the cluster, a notebook Pod and a VMI placed, a node
# switched from container to vm-passthrough with its GPU pod evicted first, and the label,
# cordon and allocatable changes seen on the double. Usage: scripts/k8s-demo.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/release}/src/cli/einsora
dir=$(mktemp -d /tmp/einsora-k8s-demo-XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
run() { echo "\$ $*"; "$@"; echo; }
wait_file() { for _ in $(seq 300); do [[ -s $1 ]] && return 0; sleep 0.1; done; echo "no $1" >&2; return 1; }

python3 tests/doubles/k8s-apiserver.py --cluster tests/fixtures/k8s/cluster.json --token demo-token \
    --port-file "$dir/k8s-port" --operator-delay 2 >/dev/null 2>"$dir/double.log" & pids+=($!)
wait_file "$dir/k8s-port"
k8s=http://127.0.0.1:$(cat "$dir/k8s-port")
cat >"$dir/kubeconfig" <<KC
apiVersion: v1
kind: Config
current-context: double
clusters: [{name: double, cluster: {server: $k8s}}]
users: [{name: sync, user: {token: demo-token}}]
contexts: [{name: double, context: {cluster: double, user: sync}}]
KC
export EINSORA_TOKEN=$("$bin" token create --state "$dir/state.db" --user ops --role admin)
"$bin" serve --listen 127.0.0.1:0 --state "$dir/state.db" --port-file "$dir/cp-port" >/dev/null 2>&1 & pids+=($!)
wait_file "$dir/cp-port"
export EINSORA_SERVER=http://127.0.0.1:$(cat "$dir/cp-port")
"$bin" k8s sync --kubeconfig "$dir/kubeconfig" --interval 1 --capabilities kata --owner ops \
    2>"$dir/sync.log" & pids+=($!)
k() { curl -s -H "Authorization: Bearer demo-token" "$k8s$1"; }
node_view() { # label, cordon and GPU allocatable of a node on the double
  k "/api/v1/nodes/$1" | python3 -c 'import json,sys; n=json.load(sys.stdin); print("%s: %s=%s unschedulable=%s allocatable=%s" % (n["metadata"]["name"], "nvidia.com/gpu.workload.config", n["metadata"]["labels"].get("nvidia.com/gpu.workload.config"), n["spec"].get("unschedulable", False), {k: v for k, v in n["status"]["allocatable"].items() if k.startswith("nvidia.com/")}))'
}
for _ in $(seq 100); do "$bin" nodes 2>/dev/null | grep -q gpu-d && break; sleep 0.2; done
sleep 2
echo "# the cluster, as the double serves it"
for n in gpu-a gpu-b gpu-c gpu-d gpu-e; do node_view $n; done
echo
run "$bin" nodes
run "$bin" capacity
run "$bin" request create --kind notebook --class nvidia-h100-80gb --wait
run "$bin" request create --kind vm --class nvidia-h100-80gb --wait
for _ in $(seq 100); do [[ $("$bin" requests | grep -c active) == 2 ]] && break; sleep 0.2; done
run "$bin" requests
echo "# on the double: the Pod and the VMI Einsora created"
k /api/v1/namespaces/einsora/pods | python3 -c 'import json,sys; [print("pod", p["metadata"]["name"], "node", p["spec"]["nodeName"], "runtimeClass", p["spec"].get("runtimeClassName"), "limits", p["spec"]["containers"][0]["resources"]["limits"], "phase", p["status"]["phase"]) for p in json.load(sys.stdin)["items"]]'
k /apis/kubevirt.io/v1/namespaces/einsora/virtualmachineinstances | python3 -c 'import json,sys; [print("vmi", v["metadata"]["name"], "node", v["status"].get("nodeName"), "gpus", v["spec"]["domain"]["devices"]["gpus"], "phase", v["status"]["phase"]) for v in json.load(sys.stdin)["items"]]'
echo
echo "# gpu-a runs a GPU pod of its own (ml/train-0) and a CPU pod (ml/web-0)"
k "/api/v1/pods?fieldSelector=spec.nodeName%3Dgpu-a" | python3 -c 'import json,sys; [print(p["metadata"]["namespace"] + "/" + p["metadata"]["name"], p["spec"]["containers"][0].get("resources", {}).get("limits", {})) for p in json.load(sys.stdin)["items"]]'
echo
node_view gpu-a
run "$bin" node mode gpu-a vm-passthrough --drain evict --wait
node_view gpu-a
run "$bin" node show gpu-a
k "/api/v1/pods?fieldSelector=spec.nodeName%3Dgpu-a" | python3 -c 'import json,sys; print("pods left on gpu-a:", [p["metadata"]["namespace"] + "/" + p["metadata"]["name"] for p in json.load(sys.stdin)["items"]])'
echo
echo "# the double's call log for gpu-a: cordon, eviction, relabel, uncordon, in that order"
curl -s "$k8s/_double/log" | python3 -c 'import json,sys; [print(e["verb"], e["resource"], e["namespace"] + "/" + e["name"] if e["namespace"] else e["name"], ("label=" + e["label"]) if "label" in e else "") for e in json.load(sys.stdin) if e["verb"] in ("patch", "create") and (e["name"] in ("gpu-a", "train-0"))]'
echo
"$bin" events | grep -E "node\.(switch|relabel)" || true
echo
echo "# the sync's log"
cat "$dir/sync.log"
