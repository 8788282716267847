"""Test/dev harness: a private containerd with locally built images."""
