"""pkletd.supervisor.node: the Node this agent registers, as the parent composes it."""
