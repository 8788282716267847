"""pkletd.workers"""
