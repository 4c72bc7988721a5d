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


# The skip policy (tests/cmake/skip_policy.cmake + tests/ctest_report.sh), end
# to end on a scratch project: outside CI a test exiting 77 is a skip and the
# report names its reason; under CI=true it fails, except a GPU test and one
# given a reason with mks_allow_skip.
REPO = os.path.dirname(os.path.dirname(HERE))
POLICY_PROJECT = """cmake_minimum_required(VERSION 3.16)
project(skips NONE)
enable_testing()
include({policy})
add_test(NAME needs_data COMMAND sh -c "echo 'skip: ../shared/vocab missing'; exit 77")
set_tests_properties(needs_data PROPERTIES LABELS cpu SKIP_RETURN_CODE 77)
add_test(NAME needs_gpu COMMAND sh -c "echo 'skip: no CUDA device'; exit 77")
set_tests_properties(needs_gpu PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
add_test(NAME rss_only COMMAND sh -c "echo 'skip: RSS meaningless under ASan'; exit 77")
set_tests_properties(rss_only PROPERTIES LABELS cpu SKIP_RETURN_CODE 77)
mks_allow_skip(rss_only "sanitizer builds")
add_test(NAME passes COMMAND sh -c "exit 0")
mks_apply_skip_policy()
"""


def run_policy(tmp_path, ci):
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "CMakeLists.txt").write_text(POLICY_PROJECT.format(
        policy=os.path.join(REPO, "tests", "cmake", "skip_policy.cmake")))
    env = dict(os.environ)
    env.pop("CI", None)
    if ci:
        env["CI"] = "true"
    b = tmp_path / ("b-ci" if ci else "b")
    subprocess.run(["cmake", "-S", str(src), "-B", str(b)], check=True, capture_output=True, env=env)
    p = subprocess.run(["bash", os.path.join(REPO, "tests", "ctest_report.sh"), "--test-dir", str(b)],
                       capture_output=True, text=True, env=env)
    return p.returncode, p.stdout


def test_skip_policy_outside_ci(tmp_path):
    rc, out = run_policy(tmp_path, ci=False)
    assert rc == 0, out
    assert "== skipped: 3 test(s)" in out
    assert "skip: ../shared/vocab missing" in out and "skip: no CUDA device" in out


def test_skip_policy_under_ci(tmp_path):
    rc, out = run_policy(tmp_path, ci=True)
    assert rc != 0, out
    assert "needs_data (Failed)" in out
    assert "== skipped: 2 test(s)" in out and "needs_gpu" in out and "rss_only" in out
