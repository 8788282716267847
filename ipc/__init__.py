"""pkletd.ipc"""
