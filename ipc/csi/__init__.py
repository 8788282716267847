"""CSI on the node: the client pkletd calls storage drivers with (``client.py``) and the
modules generated from ``proto/csi`` and ``proto/pluginregistration`` by ``make proto``
(never edited; imported by ``client.py`` only)."""
