#!/usr/bin/env bash
# demo-workloads.sh: placements that really start (R17), from the CLI, on one Lab node.
#
# Everything runs on this machine, as root, under a temp dir: a real Podman service on a
# private socket (its own storage; the image is a busybox-static rootfs, no registry), the real
# control plane, and the real agent on the HGX H100 fixture machine whose 8 GPUs are stood in
# for by character devices this script creates and describes in a CDI spec written the way
# `nvidia-ctk cdi generate` would. Passthrough VMs go to libvirt's test driver (no KVM, no GPU
# here). The last GPU is (simulated) on vfio-pci, so a VM can take it.
#
# It shows: a notebook container and a VM placed on two GPUs of the node; the container sees
# only its own GPU's device node; `einsora logs` shows its output; the container exiting frees
# its GPU (request `ended`); `einsora stop` of the VM stops it.
#
# usage: scripts/demo-workloads.sh [BUILD_DIR]   (default build/release)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build/release}
einsora=$build/src/cli/einsora
nvml_lib=$build/tests/agent/libnvidia-ml.so.1
fixture=$top/tests/fixtures/machines/hgx-h100-8gpu
[[ $(id -u) -eq 0 ]] || { echo "demo-workloads: run as root (mknod, Podman's root mode)" >&2; exit 2; }
[[ -x $einsora && -e $nvml_lib ]] || { echo "demo-workloads: build first (./dev build)" >&2; exit 2; }

d=$(mktemp -d /tmp/einsora-demo-XXXXXX)
pids=()
spec=/var/run/cdi/einsora-demo-$$.yaml
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "${podman[@]}" rm -af -t 0 >/dev/null 2>&1 || true
  rm -f "$spec"
  rm -rf "$d"
}
trap cleanup EXIT

# The engine: Podman with runc and the cgroupfs manager, container ulimits it can set here.
cat >"$d/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
events_logger = "file"
EOF
podman=(env CONTAINERS_CONF="$d/containers.conf" podman --root "$d/root" --runroot "$d/run"
        --storage-driver vfs --cgroup-manager cgroupfs --events-backend file --tmpdir "$d/tmp")
mkdir -p "$d/rootfs/bin" "$d/rootfs/dev" "$d/rootfs/proc" "$d/rootfs/sys" "$d/tmp" "$d/dev" "$d/agent"
cp /bin/busybox "$d/rootfs/bin/"
for c in sh ls cat env echo sleep; do ln -s busybox "$d/rootfs/bin/$c"; done
tar -C "$d/rootfs" -c . | "${podman[@]}" import - localhost/einsora-demo:1 >/dev/null
"${podman[@]}" system service --time 0 "unix://$d/engine.sock" >"$d/podman.log" 2>&1 &
pids+=($!)

# Fake GPUs: /dev/nvidia0..7 and nvidiactl as character devices, in a CDI spec as nvidia-ctk writes.
mkdir -p /var/run/cdi
{
  echo "cdiVersion: 0.5.0"; echo "kind: nvidia.com/gpu"; echo "devices:"
  for i in 0 1 2 3 4 5 6 7; do
    mknod "$d/dev/nvidia$i" c 195 "$i"
    echo "- name: GPU-5d3c1a0e-77f2-4b1e-9c3d-00000000000$i"
    echo "  containerEdits: {deviceNodes: [{path: /dev/nvidia$i, hostPath: $d/dev/nvidia$i}]}"
  done
  mknod "$d/dev/nvidiactl" c 195 255
  echo "containerEdits:"
  echo "  env: [NVIDIA_VISIBLE_DEVICES=void]"
  echo "  deviceNodes: [{path: /dev/nvidiactl, hostPath: $d/dev/nvidiactl}]"
} >"$spec"

# The control plane, an admin token for root, the node's agent token.
"$einsora" serve --listen 127.0.0.1:0 --state "$d/state.db" --port-file "$d/port" >"$d/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s $d/port && -S $d/engine.sock ]] && break; sleep 0.1; done
export EINSORA_SERVER=http://127.0.0.1:$(cat "$d/port")
export EINSORA_TOKEN=$("$einsora" token create --state "$d/state.db" --user root --role admin)
(umask 077; "$einsora" token create --state "$d/state.db" --user lab-h100 --role node --nodes lab-h100 >"$d/node.token")
echo "0000:db:00.0 vfio" >"$d/agent/sim-binding"
EINSORA_FAKE_NVML=$fixture/nvml.txt "$einsora" agent run --token-file "$d/node.token" --name lab-h100 \
  --site lab --site-kind lab --owner root --heartbeat 1 --state-dir "$d/agent" --simulate \
  --sysfs-root "$fixture/sys" --proc-root "$fixture/proc" --nvml-lib "$nvml_lib" \
  --engine-socket "$d/engine.sock" --images notebook=localhost/einsora-demo:1,vm=/var/lib/einsora/demo.qcow2 \
  --vm-uri test:///default --vm-domain-type test --stop-grace 2 2>"$d/agent.log" &
pids+=($!)
for _ in $(seq 100); do "$einsora" nodes 2>/dev/null | grep -q lab-h100 && break; sleep 0.1; done

e() {
  printf '$ einsora'
  for a in "$@"; do [[ $a == *" "* ]] && printf " '%s'" "$a" || printf ' %s' "$a"; done
  echo; "$einsora" "$@" || true; echo
}
e run --kind notebook --class nvidia-h100-80gb --detach -- sh -c 'echo notebook sees:; ls /dev | grep nvidia; sleep 4'
e run --kind vm --class nvidia-h100-80gb --detach
e requests
e logs 1 --engine-socket "$d/engine.sock"
echo "(the notebook exits after a few seconds)"
for _ in $(seq 200); do "$einsora" request show 1 2>/dev/null | grep -q ended && break; sleep 0.1; done
e request show 1
e stop 2
for _ in $(seq 200); do grep -q "stopped 2" "$d/agent.log" && break; sleep 0.1; done
e requests
echo "--- the agent's log"
sed 's/^/  /' "$d/agent.log"
