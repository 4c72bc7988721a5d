#!/bin/bash
# pytest_rc.sh PYTHON PYTEST-ARGS...: run pytest and map its exit status for
# ctest: 5 ("no tests ran", e.g. every test deselected) becomes 77, which
# py_package registers as SKIP_RETURN_CODE; every other status is kept
# (0 pass, 1 failures, 2-4 pytest errors). Used by run.sh, tested by
# test_ci.py.
PY=$1
shift
"$PY" -m pytest "$@"
rc=$?
if [ $rc -eq 5 ]; then
  echo "skip: pytest collected no tests"
  exit 77
fi
exit $rc
