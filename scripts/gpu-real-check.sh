#!/usr/bin/env bash
# gpu-real-check.sh: check Einsora's GPU binding on a real machine, on a spare GPU.
#
# Read-only by default: it shows what the agent sees (driver, driver_override, IOMMU group and
# its members, boot_vga, reset_method, link, device-file holders) and what `einsora agent bind
# --dry-run` would write, and it changes nothing.
#
# With --really-rebind it does the round trip for real, on the GPU you name and nothing else:
#   1. bind GPU --to vfio     (driver_override protocol; the IOMMU group moves together)
#   2. compare: every function of the group on vfio-pci
#   3. reset-check GPU        (only with --reset-check: N reset cycles on vfio-pci, R9)
#   4. bind GPU --to host     (back to the driver it had)
#   5. compare: driver links and driver_override byte for byte with the start
# It stops at the first failure and prints what the kernel shows; `einsora agent recover`
# finishes or rolls back a move left half-done. Run it as root, with nothing using the GPU
# (stop nvidia-persistenced, display managers, containers), never on the GPU driving your console.
#
# usage: scripts/gpu-real-check.sh GPU [--really-rebind] [--reset-check] [--einsora PATH]
#                                      [--state-dir DIR] [--timeout SEC]
set -euo pipefail

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

gpu="" really=0 reset=0 einsora="" state="/var/lib/einsora/agent" timeout=30
while (($#)); do
  case $1 in
    --really-rebind) really=1 ;;
    --reset-check) reset=1 ;;
    --einsora) einsora=$2; shift ;;
    --state-dir) state=$2; shift ;;
    --timeout) timeout=$2; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "gpu-real-check: unknown option $1" >&2; usage 2 ;;
    *) gpu=$1 ;;
  esac
  shift
done
[[ -n $gpu ]] || { echo "gpu-real-check: name the GPU, e.g. 0000:01:00.0 (see lspci -D -d 10de:)" >&2; exit 2; }
[[ $gpu =~ ^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$ ]] || { echo "gpu-real-check: '$gpu' is not a PCI address like 0000:01:00.0" >&2; exit 2; }
if [[ -z $einsora ]]; then
  here=$(cd "$(dirname "$0")/.." && pwd)
  for c in "$here/build/release/src/cli/einsora" "$(command -v einsora || true)"; do
    [[ -n $c && -x $c ]] && { einsora=$c; break; }
  done
fi
[[ -x $einsora ]] || { echo "gpu-real-check: einsora binary not found (./dev build, or --einsora PATH)" >&2; exit 2; }

dev=/sys/bus/pci/devices/$gpu
[[ -e $dev ]] || { echo "gpu-real-check: there is no PCI device $gpu" >&2; exit 1; }

attr() { [[ -r $1 ]] && tr -d '\0' < "$1" 2>/dev/null | head -c 200 || echo "(absent)"; }
drv() { [[ -L $1/driver ]] && basename "$(readlink "$1/driver")" || echo "(none)"; }

# The state of every function of the GPU's IOMMU group (or its slot, with the IOMMU off).
members() {
  if [[ -L $dev/iommu_group ]]; then ls "$dev/iommu_group/devices"; else ls /sys/bus/pci/devices | grep "^${gpu%.*}\."; fi
}
snapshot() {
  for m in $(members); do
    printf '%s driver=%s driver_override=%s\n' "$m" "$(drv /sys/bus/pci/devices/$m)" "$(attr /sys/bus/pci/devices/$m/driver_override)"
  done
}

echo "== what the agent sees for $gpu"
printf '  vendor:device   %s:%s  class %s\n' "$(attr $dev/vendor)" "$(attr $dev/device)" "$(attr $dev/class)"
printf '  boot_vga        %s\n' "$(attr $dev/boot_vga)"
printf '  reset_method    %s\n' "$(attr $dev/reset_method)"
printf '  power_state     %s\n' "$(attr $dev/power_state)"
printf '  link            %s x%s (max %s x%s)\n' "$(attr $dev/current_link_speed)" "$(attr $dev/current_link_width)" \
  "$(attr $dev/max_link_speed)" "$(attr $dev/max_link_width)"
if [[ -L $dev/iommu_group ]]; then
  printf '  IOMMU group     %s\n' "$(basename "$(readlink $dev/iommu_group)")"
else
  echo "  IOMMU group     none: the IOMMU is off, so passthrough will be refused"
fi
echo "== functions that move together"
snapshot | sed 's/^/  /'
echo "== processes holding its device files (needs root to see all)"
held=0
for fd in /proc/[0-9]*/fd/*; do
  t=$(readlink "$fd" 2>/dev/null) || continue
  case $t in /dev/nvidia[0-9]*|/dev/dri/*|/dev/vfio/[0-9]*)
    p=${fd#/proc/}; p=${p%%/*}; echo "  $(cat /proc/$p/comm 2>/dev/null) (pid $p) holds $t"; held=1 ;;
  esac
done
((held)) || echo "  none"
[[ -r /dev/kmsg ]] && echo "== kernel log readable at /dev/kmsg (reset-check reads new lines there)"

common=(--state-dir "$state" --timeout "$timeout")
echo "== einsora agent bind $gpu --to vfio --dry-run"
"$einsora" agent bind "$gpu" --to vfio --dry-run "${common[@]}" || true

if ((!really)); then
  echo
  echo "Read-only run: nothing was changed. Add --really-rebind to do the round trip on this GPU."
  exit 0
fi

[[ $(id -u) -eq 0 ]] || { echo "gpu-real-check: --really-rebind needs root" >&2; exit 1; }
before=$(snapshot)
fail() {
  echo "gpu-real-check: FAILED: $*" >&2
  echo "The kernel now shows:" >&2; snapshot | sed 's/^/  /' >&2
  echo "Run '$einsora agent recover --state-dir $state' to finish or roll back." >&2
  exit 1
}
echo "== bind to vfio-pci"
start=$(date +%s.%N)
"$einsora" agent bind "$gpu" --to vfio "${common[@]}" || fail "bind --to vfio"
for m in $(members); do
  c=$(attr /sys/bus/pci/devices/$m/class)
  [[ $c == 0x0604* ]] && continue   # bridges stay on pcieport
  [[ $(drv /sys/bus/pci/devices/$m) == vfio-pci ]] || fail "$m is not on vfio-pci"
done
if ((reset)); then
  echo "== reset-cycle check"
  "$einsora" agent reset-check "$gpu" "${common[@]}" || echo "reset-check did not pass (see above); continuing back to the host"
fi
echo "== back to the host driver"
"$einsora" agent bind "$gpu" --to host "${common[@]}" || fail "bind --to host"
end=$(date +%s.%N)
after=$(snapshot)
if [[ $before == "$after" ]]; then
  printf 'PASS: every function is back where it was (round trip %s s)\n' "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')"
else
  echo "MISMATCH between start and end:"; diff <(echo "$before") <(echo "$after") || true
  exit 1
fi
