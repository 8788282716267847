"""``python -m tests.harness.controlplane build``: build the binaries that are missing."""

from __future__ import annotations

import sys

from tests.harness.controlplane.commands import main

if __name__ == "__main__":
    sys.exit(main())
