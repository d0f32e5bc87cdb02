#!/usr/bin/env bash
# tests/docs/test_layers.sh: libdlock's includes follow the layer table
# of docs/architecture.md (docs.layers).
#
# The table under "libdlock's modules" names each folder of src/lib and
# the folders it may include; the list after it names the includes that
# are known to point up ("- `client/client.c` → `lock/watchdog.h`, ...").
# Reading both from the page keeps the page and the tree in step: an
# include the page does not allow fails here, and so does a folder the
# page does not list, or a listed exception that no longer exists.
set -euo pipefail

root=${DLOCK_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)}
cd "$root"
exec python3 - docs/architecture.md src/lib <<'PY'
import os, re, sys

page, lib = sys.argv[1], sys.argv[2]
text = open(page, encoding="utf-8").read()
start = text.index("### libdlock's modules")
section = text[start:text.index("\n### ", start + 1)]

allowed = {}
for line in section.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    m = re.fullmatch(r"`([a-z_]+)/`", cells[0]) if len(cells) == 3 else None
    if m:
        allowed[m.group(1)] = set(re.findall(r"`([a-z_]+)/`", cells[2]))
exceptions = set()
for m in re.finditer(r"^- `([a-z_]+/[a-z_]+\.[ch])` → ((?:`[a-z_/]+\.h`(?:, )?)+)",
                     section, re.M):
    for h in re.findall(r"`([a-z_/]+\.h)`", m.group(2)):
        exceptions.add((m.group(1), h))

bad, used = [], set()
for folder in sorted(os.listdir(lib)):
    path = os.path.join(lib, folder)
    if not os.path.isdir(path):
        bad.append(f"src/lib/{folder}: a file outside the layer folders")
        continue
    if folder not in allowed:
        bad.append(f"src/lib/{folder}/: a folder the table does not list")
        continue
    for name in sorted(os.listdir(path)):
        if not name.endswith((".c", ".h")):
            continue
        rel = f"{folder}/{name}"
        for n, line in enumerate(open(os.path.join(path, name)), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m or m.group(1).startswith("dlock/"):
                continue
            inc = m.group(1)
            target = inc.split("/")[0] if "/" in inc else None
            if target is None:
                bad.append(f"src/lib/{rel}:{n}: \"{inc}\" names no folder")
            elif (rel, inc) in exceptions:
                used.add((rel, inc))
            elif target not in allowed[folder]:
                bad.append(f"src/lib/{rel}:{n}: {folder}/ may not include {inc}")
for rel, inc in sorted(exceptions - used):
    bad.append(f"{page}: the exception {rel} → {inc} is not in the tree")
if not allowed:
    bad.append(f"{page}: no layer table found")
for b in bad:
    print(b)
if bad:
    print(f"layers: {len(bad)} include(s) break the table in {page}")
    sys.exit(1)
print(f"layers: {len(allowed)} folders, every include as the table says"
      f" ({len(used)} known exception(s))")
PY
