#!/usr/bin/env python3
"""Generate the man pages and the bash and zsh completions of einsora from the built binary.

They come from the same source as `einsora help` and `einsora VERB --help` (the verb table in
src/cli/main.c and each verb's usage text), so they cannot drift from what --help says.
Usage: gen-cli-docs.py EINSORA OUTDIR VERB... (the verbs meson expects pages for: the build
fails when they differ from the binary's verb table, so a new verb is not left without a page).
"""
import os
import re
import subprocess
import sys

einsora, outdir, expected = sys.argv[1], sys.argv[2], sys.argv[3:]
env = dict(os.environ, XDG_CONFIG_HOME="/nonexistent")


def run(*args):
    p = subprocess.run([einsora, *args], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"gen-cli-docs: einsora {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p.stdout


overview = run("help")
verbs = []
in_verbs = False
for line in overview.splitlines():
    if line == "Verbs:":
        in_verbs = True
        continue
    if in_verbs:
        m = re.match(r"  (\S+)\s+(.*)", line)
        if not m:
            break
        verbs.append((m.group(1), m.group(2)))
names = [v for v, _ in verbs if v != "help"]
if sorted(names) != sorted(expected):
    sys.exit(f"gen-cli-docs: the verb table {sorted(names)} differs from the pages meson "
             f"installs {sorted(expected)}: update src/cli/meson.build")

helps = {v: run(v, "--help") for v in names}


def flags_of(text):
    return sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text)))


flags = {v: flags_of(h) for v, h in helps.items()}
# A verb with sub-verbs ("usage: einsora agent SUB ...") lists them one per line; each has its
# own --help, whose options go on the verb's page and into the completions.
subs = {}
for v, h in helps.items():
    if " SUB" not in h.splitlines()[0]:
        continue
    subs[v] = [m.group(1) for m in re.finditer(r"^  ([a-z][a-z0-9-]*)\s{2,}\S", h, re.M)]
sub_helps = {(v, sb): run(v, sb, "--help") for v in subs for sb in subs[v]}
# The others name theirs in their usage lines ("einsora token create ...", "cordon|uncordon").
words = {v: list(subs[v]) for v in subs}
for v, h in helps.items():
    if v in subs:
        continue
    found = []
    for m in re.finditer(rf"^(?:usage:|\s+)\s*einsora {re.escape(v)} (.*)$", h, re.M):
        prev = None
        for alt in re.split(r"\s*\|\s*", m.group(1)):
            toks = alt.split()
            w = toks[0] if toks else ""
            # An alternative is a sub-verb after a bare one ("cordon|uncordon") or after one's
            # placeholder ("trust NAME | untrust"), not a value ("NAME container|vm-passthrough").
            first_or_sub = prev is None or len(prev) == 1 or prev[-1].isupper()
            if first_or_sub and re.fullmatch(r"[a-z][a-z-]*", w) and w not in found:
                found.append(w)
            prev = toks or [""]
    if found:
        words[v] = found


def roff(text):
    out = []
    for line in text.splitlines():
        line = line.replace("\\", "\\e")
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return "\n".join(out)


def page(name, summary, body):
    return (f'.TH {name.upper()} 1 "" "einsora" "Einsora GPU"\n'
            f".SH NAME\n{name} \\- {roff(summary)}\n"
            f".SH DESCRIPTION\n.nf\n{roff(body)}\n.fi\n"
            ".SH SEE ALSO\n" + ("einsora(1)" if name != "einsora" else
                                ", ".join(f"einsora-{v}(1)" for v in names)) + "\n")


summaries = dict(verbs)
with open(os.path.join(outdir, "einsora.1"), "w") as f:
    f.write(page("einsora", "find, classify and place GPUs", overview))
for v in names:
    body = helps[v] + "".join(f"\n\neinsora {v} {sb}\n\n{sub_helps[(v, sb)]}"
                              for sb in subs.get(v, []))
    with open(os.path.join(outdir, f"einsora-{v}.1"), "w") as f:
        f.write(page(f"einsora-{v}", summaries[v], body))

all_verbs = " ".join([v for v, _ in verbs])
sub_cases = "\n".join(f'        {v}/{sb}) opts="{" ".join(flags_of(sub_helps[(v, sb)]))}" ;;'
                      for v in subs for sb in subs[v])
cases = "\n".join(f'        {v}/*) opts="{" ".join(flags[v])}" ;;' for v in names)
sub_lists = "\n".join(f'        {v}) COMPREPLY=($(compgen -W "{" ".join(words[v])} --help" -- "$cur")); return ;;'
                      for v in words)
with open(os.path.join(outdir, "einsora"), "w") as f:  # bash-completion wants the command name
    f.write(f"""# bash completion for einsora (generated from its --help by scripts/gen-cli-docs.py)
_einsora() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" opts=""
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "{all_verbs} --help --version" -- "$cur"))
        return
    fi
    if [ "$COMP_CWORD" -eq 2 ]; then
        case "${{COMP_WORDS[1]}}" in
{sub_lists}
        esac
    fi
    case "${{COMP_WORDS[1]}}/${{COMP_WORDS[2]}}" in
{sub_cases}
{cases}
        help/*) COMPREPLY=($(compgen -W "{' '.join(names)}" -- "$cur")); return ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$opts --help" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -F _einsora einsora
""")

zflags = {v: sorted(set(flags[v]).union(*[flags_of(sub_helps[(v, sb)]) for sb in subs.get(v, [])]))
          for v in names}
zcases = "\n".join(f"    {v}) opts=({' '.join(zflags[v])} {' '.join(words.get(v, []))}) ;;"
                   for v in names)
zverbs = "\n".join(f"    '{v}:{d.replace(chr(39), '')}'" for v, d in verbs)
with open(os.path.join(outdir, "_einsora"), "w") as f:
    f.write(f"""#compdef einsora
# zsh completion for einsora (generated from its --help by scripts/gen-cli-docs.py)
local -a verbs opts
verbs=(
{zverbs}
)
if (( CURRENT == 2 )); then
  _describe 'verb' verbs
  return
fi
case $words[2] in
{zcases}
esac
if [[ $PREFIX == -* ]]; then
  compadd -- $opts --help
else
  _files
fi
""")
