"""Runs pytest with the arguments given, under an interpreter that has pytest: this one,
else the system's /usr/bin/python3 (a pyenv or venv python3 may come first on PATH).
Fails with what to install when none has it."""
import os
import subprocess
import sys


def has_pytest(python: str) -> bool:
    return subprocess.run([python, "-c", "import pytest"], capture_output=True).returncode == 0


def main() -> int:
    candidates = [sys.executable, "/usr/bin/python3"]
    for python in candidates:
        if os.path.exists(python) and has_pytest(python):
            return subprocess.run([python, "-m", "pytest", *sys.argv[1:]]).returncode
    print("python.pytest: pytest is not installed for " + " or ".join(candidates) +
          "; install it (Debian/Ubuntu: apt-get install -y python3-pytest, or pip install pytest)",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
