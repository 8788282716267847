"""pkletd.ipc.apimodel: the Pod API as pkletd reads it.

Parses and validates a Pod's JSON into frozen dataclasses (``podspec`` with its
parts: env, volumes, security, resources, probes), with the field path in every
error, and the API's quantities. Imports nothing else of pkletd.
"""
