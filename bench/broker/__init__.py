"""Broker benchmark: acknowledged records/s with acks=all, RF 3 on 3 local brokers."""
