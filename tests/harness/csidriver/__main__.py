"""``python -m tests.harness.csidriver --name ... --endpoint ...`` (``config.py`` has the
flags): the host-path CSI driver and its registrar, in one process."""

import sys

from tests.harness.csidriver.server import main

sys.exit(main())
