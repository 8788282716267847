"""Modules generated from ``proto/containerd`` by ``make proto``: containerd's events
service and the event messages the PLEG reads. Never edited; imported by
``ipc/runtime/events.py`` only."""
