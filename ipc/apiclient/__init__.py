"""pkletd.ipc.apiclient"""
