"""The broker under test: Kafka's replication design on asyncio. Imports nothing of the harness."""
