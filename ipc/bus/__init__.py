"""pkletd.ipc.bus"""
