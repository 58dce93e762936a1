#!/usr/bin/env python3
"""Sum the results of every test in meson test logs into one closing line CI can read.

A Criterion binary counts as its individual tests (its "Synthesis" line), so does a
`node --test` run (its "# pass N" / "# fail N" lines); any other test counts as one. The
last line printed is "N passed, N failed"."""
import json
import re
import sys

NODE_PASS = re.compile(r"^# pass (\d+)$", re.M)
NODE_FAIL = re.compile(r"^# fail (\d+)$", re.M)
SYNTH = re.compile(r"Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)")
passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except FileNotFoundError:
        print(f"summarize: {path} missing: its tests did not run", file=sys.stderr)
        failed += 1
        continue
    for line in lines:
        t = json.loads(line)
        out = (t.get("stdout") or "") + (t.get("stderr") or "")
        m = SYNTH.findall(out)
        np, nf = NODE_PASS.findall(out), NODE_FAIL.findall(out)
        if t["result"] == "SKIP":
            skipped += 1
        elif np and nf:
            passed += int(np[-1])
            failed += int(nf[-1])
            if t["result"] != "OK" and int(nf[-1]) == 0:
                failed += 1  # the run failed outside any test (e.g. the fleet did not start)
                print(f"FAILED: {t['name']}", file=sys.stderr)
        elif m:
            tested, ok, bad, crash = map(int, m[-1])
            passed += ok
            failed += bad + crash
            if t["result"] != "OK" and bad + crash == 0:
                failed += 1  # the binary failed outside any test (e.g. a sanitizer at exit)
        elif t["result"] == "OK":
            passed += 1
        else:
            failed += 1
            print(f"FAILED: {t['name']}", file=sys.stderr)
suffix = f", {skipped} skipped" if skipped else ""
print(f"{passed} passed, {failed} failed{suffix}")
sys.exit(1 if failed else 0)
