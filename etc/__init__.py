"""``pkletd.etc`` when installed: the systemd unit, the default KubeletConfiguration and
the demo manifests, as package data (``importlib.resources.files("pkletd.etc")``)."""
