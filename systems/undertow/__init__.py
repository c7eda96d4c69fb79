"""Our own broker (broker-image/broker): Kafka's replication design, KRaft-style quorum."""
