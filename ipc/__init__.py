"""pkletd.ipc: the shared layer, what the parent and the workers both speak and read.

One room per concern, none importing the parent or a worker:

- ``bus``: the ZeroMQ sockets (``sockets``), the msgpack codec, every message schema;
- ``runtime``: the typed CRI client, containerd's event stream, probe and hook handlers;
- ``apiclient``: the Kubernetes API server through the official client (connection,
  reflector, job threads, retries);
- ``apimodel``: the API's object model as pkletd reads it (pods, static pod manifests);
- ``nodestats``: the node's and pods' figures read from cgroups, /proc and the CRI;
- ``wakeup`` (the fd every loop polls), ``clock`` and ``tlsnames`` beside them.
"""
