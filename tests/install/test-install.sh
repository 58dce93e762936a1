#!/bin/bash
# test-install.sh: `meson install` into a temporary DESTDIR puts everything in its FHS place
# and the installed binary finds its data relative to itself (nothing compiled in from
# the source tree), the completions work, and the systemd units pass `systemd-analyze verify`
# with no warning and stay hardened (`systemd-analyze security` exposure). One line per check.
set -u
build="$1" src="$2"
dest=$(mktemp -d /tmp/einsora-install-XXXXXX)
trap 'rm -rf "$dest"' EXIT
failed=0
check() { # check "what" command...
  local what="$1"; shift
  if "$@" >/dev/null 2>&1; then echo "ok: $what"; else echo "FAIL: $what"; failed=1; fi
}

meson install -C "$build" --destdir "$dest" --no-rebuild --quiet || { echo "FAIL: meson install"; exit 1; }
prefix=$(meson introspect "$build" --buildoptions | python3 -c \
  'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"))')
root="$dest$prefix"

for f in bin/einsora share/einsora/catalog.yaml share/man/man1/einsora.1 \
         share/man/man1/einsora-requests.1 share/man/man1/einsora-login.1 \
         share/bash-completion/completions/einsora share/zsh/site-functions/_einsora \
         lib/systemd/system/einsora-server.service lib/systemd/system/einsora-agent.service \
         lib/sysusers.d/einsora.conf share/doc/einsora/install.md \
         share/einsora/demo/machines/hgx-h100-8gpu/sys share/einsora/demo/machines/README.md; do
  check "installed $f" test -e "$root/$f"
done
check "fixture fd links stay links" test -L "$root/share/einsora/demo/machines/hgx-h100-8gpu/proc/4242/fd/1"

# The data dir is found at run time: from the installed binary, outside any source tree.
check "installed einsora finds its catalog" \
  env -u EINSORA_CATALOG -u EINSORA_DATA_DIR sh -c "cd / && '$root/bin/einsora' catalog show"
check "no source-tree data path in the binary" bash -c "! grep -aq '$src/data' '$root/bin/einsora'"
mkdir -p "$dest/elsewhere/bin"
cp "$root/bin/einsora" "$dest/elsewhere/bin/"
out=$(cd / && env -u EINSORA_CATALOG -u EINSORA_DATA_DIR "$dest/elsewhere/bin/einsora" catalog show 2>&1)
rc=$?
if [ -e "$prefix/share/einsora/catalog.yaml" ]; then
  echo "ok: (skipped: einsora is installed in $prefix on this machine)"
elif [ $rc -ne 0 ] && [[ "$out" == *"cannot read catalog $prefix/share/einsora/catalog.yaml"* ]]; then
  echo "ok: a binary without data says where it looked"
else
  echo "FAIL: a binary without data: rc=$rc: $out"; failed=1
fi

# Man pages and completions come from --help: every verb of the table has its page.
for v in $(sed -n '/^Verbs:/,/^$/p' <("$root/bin/einsora" help) | awk 'NR>1 && NF {print $1}'); do
  [ "$v" = help ] && continue
  check "man page of $v" grep -q "^\.TH EINSORA-${v^^} 1" "$root/share/man/man1/einsora-$v.1"
done
check "bash completion completes verbs" bash -c "
  source '$root/share/bash-completion/completions/einsora'
  COMP_WORDS=(einsora reque); COMP_CWORD=1; _einsora
  [[ \" \${COMPREPLY[*]} \" == *' requests '* && \" \${COMPREPLY[*]} \" == *' request '* ]]"
check "bash completion completes a verb's flags" bash -c "
  source '$root/share/bash-completion/completions/einsora'
  COMP_WORDS=(einsora events --fol); COMP_CWORD=2; _einsora
  [[ \"\${COMPREPLY[*]}\" == '--follow' ]]"
check "bash completion completes a sub-verb and its flags" bash -c "
  source '$root/share/bash-completion/completions/einsora'
  COMP_WORDS=(einsora token cr); COMP_CWORD=2; _einsora
  [[ \"\${COMPREPLY[*]}\" == 'create' ]] || exit 1
  COMP_WORDS=(einsora agent run --token-f); COMP_CWORD=3; _einsora
  [[ \"\${COMPREPLY[*]}\" == '--token-file' ]]"
check "a sub-verb's options are on its verb's man page" \
  grep -q -- '--token-file' "$root/share/man/man1/einsora-agent.1"
if command -v zsh >/dev/null; then
  check "zsh completion parses" zsh -n "$root/share/zsh/site-functions/_einsora"
fi

# The units: systemd-analyze checks them against the installed binary (its path rewritten
# into DESTDIR, since verify insists the ExecStart program exists).
if ! command -v systemd-analyze >/dev/null; then
  echo "FAIL: systemd-analyze missing (./dev installs the systemd package)"; exit 1
fi
units="$dest/units"
mkdir -p "$units"
for u in einsora-server einsora-agent; do
  sed "s|$prefix/bin/einsora|$root/bin/einsora|" "$root/lib/systemd/system/$u.service" > "$units/$u.service"
  check "$u.service runs the installed binary" grep -q "^ExecStart=$prefix/bin/einsora " \
    "$root/lib/systemd/system/$u.service"
  msgs=$(cd "$units" && systemd-analyze verify --man=no "./$u.service" 2>&1)
  if [ $? -eq 0 ] && [ -z "$msgs" ]; then echo "ok: systemd-analyze verify $u.service"
  else echo "FAIL: systemd-analyze verify $u.service: $msgs"; failed=1; fi
  for key in ProtectSystem=strict StateDirectory= NoNewPrivileges=yes; do
    check "$u.service has $key" grep -q "^$key" "$units/$u.service"
  done
done
check "the server keeps no capability" grep -qx "CapabilityBoundingSet=" "$units/einsora-server.service"
check "the agent keeps only what binding needs" grep -qx \
  "CapabilityBoundingSet=CAP_SYS_MODULE CAP_SYS_ADMIN CAP_SYS_PTRACE CAP_DAC_READ_SEARCH" \
  "$units/einsora-agent.service"
# systemd's own exposure score (0 best, 10 worst): the server is locked down, the agent as far
# as binding GPUs allows.
for pair in einsora-server:2.0 einsora-agent:5.0; do
  u=${pair%%:*} max=${pair##*:}
  score=$(cd "$units" && systemd-analyze security --offline=yes --no-pager "./$u.service" 2>/dev/null |
          sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p')
  if [ -n "$score" ] && python3 -c "import sys; sys.exit(0 if $score <= $max else 1)"; then
    echo "ok: $u exposure $score <= $max"
  else
    echo "FAIL: $u exposure '${score}' > $max"; failed=1
  fi
done
exit $failed
