"""pkletd.ipc: every wire protocol pkletd speaks.

The bus (``bus``, ``codec``, ``messages``), the typed CRI client (``cri``), the
probe and hook handlers (``handlers``), the wake-up fd every loop polls
(``wakeup``), and the Kubernetes API's object model as pkletd reads it
(``apimodel``).
"""
