"""tests/python/pytest_rc.sh: pytest's exit statuses as ctest sees them (run.sh, ctest py_package, .ci/run)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def rc_of(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    p = subprocess.run(["bash", os.path.join(HERE, "pytest_rc.sh"), sys.executable, "-q", "-p", "no:cacheprovider",
                        str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    return p.returncode, p.stdout


def test_no_tests_is_a_skip(tmp_path):
    rc, out = rc_of(tmp_path, {"test_none.py": "x = 1\n"})
    assert rc == 77 and "no tests" in out


def test_failures_and_passes_are_kept(tmp_path):
    d = tmp_path / "f"
    d.mkdir()
    assert rc_of(d, {"test_f.py": "def test_f():\n    assert False\n", "test_g.py": "def test_g():\n    pass\n"})[0] == 1
