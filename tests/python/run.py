"""Runs pytest on the files given (ctest's python_* tests); exit 77 (skipped) without pytest."""
import sys

try:
    import pytest
except ImportError:
    print("skipped: pytest is not installed for " + sys.executable + " (python3-pytest; scripts/install-deps installs it)")
    sys.exit(77)
sys.exit(pytest.main(sys.argv[1:]))
