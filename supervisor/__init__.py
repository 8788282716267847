"""pkletd.supervisor"""
