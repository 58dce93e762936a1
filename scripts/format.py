#!/usr/bin/env python3
"""format.py: the repository's .clang-format over every C file of src/, tests/, bench/, fuzz/.

  format.py --apply [ROOT]      rewrite the files in place (`./dev format`)
  format.py --check [ROOT]      list each unformatted file and fail (the `format` test)
  format.py --self-test         prove --check fails on an unformatted file and passes on a
                                formatted one, in a temp copy (the `format-self-test` test)

Needs clang-format-14 (or a clang-format that is version 14: another version formats
differently)."""
import os
import shutil
import subprocess
import sys
import tempfile

DIRS = ("src", "tests", "bench", "fuzz")


def clang_format():
    for name in ("clang-format-14", "clang-format"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("format.py: clang-format-14 is not installed (./dev deps installs it)")


def c_files(root):
    out = []
    for top in DIRS:
        for d, subdirs, files in os.walk(os.path.join(root, top)):
            subdirs[:] = sorted(s for s in subdirs if s != "node_modules" and not s.startswith("."))
            out += [os.path.relpath(os.path.join(d, f), root) for f in sorted(files)
                    if f.endswith((".c", ".h"))]
    return out


def unformatted(root, files):
    cf = clang_format()
    bad = []
    for i in range(0, len(files), 50):
        chunk = files[i:i + 50]
        # --dry-run -Werror exits non-zero and names each file that would change
        p = subprocess.run([cf, "--style=file", "--dry-run", "-Werror"] + chunk, cwd=root,
                           capture_output=True, text=True)
        if p.returncode != 0:
            for f in chunk:
                q = subprocess.run([cf, "--style=file", "--dry-run", "-Werror", f], cwd=root,
                                   capture_output=True, text=True)
                if q.returncode != 0:
                    bad.append(f)
    return bad


def check(root):
    files = c_files(root)
    bad = unformatted(root, files)
    for f in bad:
        print(f"not formatted: {f}")
    if bad:
        print(f"format: {len(bad)} of {len(files)} files are not formatted; `./dev format` fixes them")
        return 1
    print(f"format: {len(files)} files formatted")
    return 0


def apply(root):
    cf = clang_format()
    files = c_files(root)
    for i in range(0, len(files), 50):
        subprocess.run([cf, "--style=file", "-i"] + files[i:i + 50], cwd=root, check=True)
    print(f"format: {len(files)} files formatted in place")
    return 0


def self_test():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as root:
        shutil.copy(os.path.join(here, ".clang-format"), root)
        os.makedirs(os.path.join(root, "src", "util"))
        path = os.path.join(root, "src", "util", "sample.c")
        with open(path, "w", encoding="utf-8") as f:
            f.write("int  add(int a,int b){return a+b;}\n")
        if check(root) == 0:
            print("format-self-test: the check passed an unformatted file")
            return 1
        apply(root)
        if check(root) != 0:
            print("format-self-test: the check failed a file clang-format wrote")
            return 1
    print("format-self-test: unformatted file caught, formatted file passes")
    return 0


def main(argv):
    if argv[1:2] == ["--self-test"]:
        return self_test()
    if len(argv) not in (2, 3) or argv[1] not in ("--check", "--apply"):
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[2] if len(argv) == 3 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return check(root) if argv[1] == "--check" else apply(root)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
