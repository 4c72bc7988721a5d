"""tests/readme_examples.py, the runner of ctest readme_examples (issue 32: the README's examples did not run as
written): it runs every ```sh / ```python block in order, carries what a block exports and where it cds into the
next, honours the visible readme-test markers (skip / allow-exit, counted and printed with their reasons), and fails
when any block fails. The README itself is run by ctest readme_examples; here only its markers are checked."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT

RUNNER = os.path.join(ROOT, "tests", "readme_examples.py")


def run(tmp_path, text, *extra):
    readme = tmp_path / "README.md"
    readme.write_text(text)
    (tmp_path / "samples").mkdir(exist_ok=True)
    (tmp_path / "shared").mkdir(exist_ok=True)
    p = subprocess.run([sys.executable, RUNNER, "--readme", str(readme), "--src", str(tmp_path), "--shared",
                        str(tmp_path / "shared"), "--python", sys.executable, "--timeout", "60", *extra],
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


GOOD = """# t
```sh
export X=5
mkdir -p d && cd d
echo hello > f.txt
```
A synopsis is not run:
```
mkshards --nonsense
```
<!-- readme-test: skip (needs a cluster) -->
```sh
exit 9
```

<!-- readme-test: allow-exit 1 (grep finds nothing: exit 1) -->
```sh
grep -q nothing-here f.txt
test "$X" = 5
```
```python
import os
assert os.environ["X"] == "5" and os.path.basename(os.getcwd()) == "d"
assert open("f.txt").read() == "hello\\n"
assert os.path.islink(os.path.join("..", "samples")) and os.path.isdir(os.path.join("..", "..", "shared"))
```
"""


def test_blocks_run_in_order_with_the_session(tmp_path):
    rc, out = run(tmp_path, GOOD)
    assert rc == 0, out
    assert "3 ran" in out and "0 failed" in out and "1 skipped" in out, out
    assert "skipped README.md:12 sh: needs a cluster" in out, out


@pytest.mark.parametrize("block,where", [
    ("```sh\nfalse\necho not reached\n```\n", "README.md:1 sh"),
    ("```sh\nfalse | true\n```\n", "README.md:1 sh"),  # pipefail
    ("<!-- readme-test: allow-exit 1 (x) -->\n```sh\n(exit 2)\n```\n", "README.md:2 sh"),
    ("```python\nraise SystemExit(3)\n```\n", "README.md:1 python"),
    ("```python\nimport nonexistent_module_xyz\n```\n", "README.md:1 python"),
])
def test_a_failing_block_fails_the_test(tmp_path, block, where):
    rc, out = run(tmp_path, block + "```sh\ntrue\n```\n")
    assert rc == 1 and f"FAIL {where}" in out and "1 failed" in out, out


def test_markers_are_checked(tmp_path):
    rc, out = run(tmp_path, "<!-- readme-test: skipp (typo) -->\n```sh\ntrue\n```\n")
    assert rc != 0 and "unknown readme-test marker" in out, out
    rc, out = run(tmp_path, "<!-- readme-test: skip (x) -->\n```\nsynopsis\n```\n")
    assert rc != 0 and "only sh / python run" in out, out


def test_torch_blocks(tmp_path):
    text = "```sh\ntrue\n```\n```python\nimport torch\n```\n"
    try:
        import torch  # noqa: F401
        have = True
    except ImportError:
        have = False
    rc, out = run(tmp_path, text)
    if have:
        assert rc == 0 and "2 ran" in out, out
    else:
        assert rc == 0 and "torch is not installed" in out and "1 skipped" in out, out
        rc, out = run(tmp_path, text, "--require", "torch")
        assert rc == 1 and "torch is required" in out, out


def test_the_readme_markers():
    """Every marker of README.md is one the runner knows, the blocks it runs include Python and sh ones, and
    each skipped block says why."""
    sys.path.insert(0, os.path.dirname(RUNNER))
    try:
        import readme_examples
    finally:
        sys.path.remove(os.path.dirname(RUNNER))
    blocks = readme_examples.blocks_of(os.path.join(ROOT, "README.md"))
    run_sh = [b for b in blocks if b.lang == "sh" and b.skip is None]
    run_py = [b for b in blocks if b.lang == "python" and b.skip is None]
    assert len(run_sh) >= 5 and len(run_py) >= 2, [(b.line, b.lang, b.skip) for b in blocks]
    assert all(b.skip.strip() for b in blocks if b.skip is not None)
