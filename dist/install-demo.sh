#!/bin/sh
# install-demo.sh: copy the demo's fixture machines into <datadir>/einsora/demo/machines at
# `meson install`. cp -a, not meson's install_subdir: the fixtures' /proc/PID/fd entries are
# symlinks to device paths (/dev/nvidia0) that must stay links, never be read.
set -eu
src="$1"; datadir="$2"
dest="${MESON_INSTALL_DESTDIR_PREFIX}/${datadir}/einsora/demo/machines"
mkdir -p "$dest"
for m in hgx-h100-8gpu h200-mig rtx4090-clean-group amd-mi300x no-accelerator \
         README.md mac-m2-max-64gb.txt; do
  rm -rf "${dest:?}/$m"
  cp -a "$src/$m" "$dest/$m"
done
