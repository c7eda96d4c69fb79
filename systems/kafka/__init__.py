"""Apache Kafka under test: KRaft clusters from Maven Central, driven by confluent-kafka."""
