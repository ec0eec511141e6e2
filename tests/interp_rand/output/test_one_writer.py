"""Nothing but interp_rand.output writes files (issue 26: one writer module for every output):
the package sources are scanned for every other way of writing one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SOURCES = sorted(p for pkg in ("interp_rand", "circuits", "probes") for p in (ROOT / pkg).rglob("*.py")
                 if "output" not in p.relative_to(ROOT).parts[1:2])
WRITES = re.compile(r"\.write_text\(|\.write_bytes\(|\bopen\([^)]*['\"][wax]b?\+?['\"]|json\.dump\(|os\.replace\("
                    r"|\bmkstemp\(|\bmkdtemp\(|os\.rename\(|\.rename\(|shutil\.copy|shutil\.move|nx\.write_\w+\(\s*[^,]+,"
                    r"\s*str\(|os\.open\(|\bsave_file\(|torch\.save\(")
# what may still write outside the module, and why
ALLOWED = {
    # safetensors writes the tensors, into the new folder output.folder.replace_folder made
    ("interp_rand/training/checkpoint.py", "save_file"),
    # a developer's tool regenerating a source file of the package (not an output)
    ("interp_rand/cli/catalogue.py", "write_text"),
    # a forked demo step's stderr re-opened on its descriptor, which points at a scratch file of
    # the step's progress in a temporary folder (no output of the tour)
    ("interp_rand/demo.py", 'open(2, "w"'),
}


def test_the_scan_sees_the_package_and_catches_a_write():
    assert len(SOURCES) > 100
    assert WRITES.search('(out / "eval.json").write_text(json.dumps(x))')
    assert WRITES.search('with open(path, "a") as handle:')


def test_no_package_file_writes_a_file_but_through_interp_rand_output():
    found, allowed = [], set()
    for path in SOURCES:
        name = str(path.relative_to(ROOT))
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if not WRITES.search(code):
                continue
            exempt = {(f, w) for f, w in ALLOWED if name == f and w in code}
            allowed |= exempt
            if not exempt:
                found.append(f"{name}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
    assert allowed == ALLOWED  # no stale exemption
