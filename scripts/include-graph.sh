#!/usr/bin/env bash
# include-graph.sh [REV]: which src/ folder includes which, from the `#include "folder/…"`
# lines of src/ (at git revision REV, or the working tree). One line per edge:
# "from -> to (N includes)". Same-folder includes are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -gt 0 ]]; then
  lines=$(git grep -E '^#include "[a-z0-9_-]+/' "$1" -- 'src/*.c' 'src/*.h' | sed "s|^$1:||")
else
  lines=$(grep -rE '^#include "[a-z0-9_-]+/' src --include='*.c' --include='*.h')
fi
# Each line is "src/FROM/file:#include "TO/…""; agent sources that live under src/agent
# count as agent even when another folder compiles them.
sed -E 's|^src/([a-z0-9_-]+)/[^:]*:#include "([a-z0-9_-]+)/.*|\1 \2|' <<<"$lines" |
  awk '$1 != $2 && $2 != "criterion" && $2 != "sys" {n[$1 " -> " $2]++}
       END {for (e in n) printf "%s (%d includes)\n", e, n[e]}' | sort
