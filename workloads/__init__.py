"""Workloads: a client, a generator, a final generator and the checks each needs."""
