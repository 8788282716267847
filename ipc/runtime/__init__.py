"""pkletd.ipc.runtime"""
