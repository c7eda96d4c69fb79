# The way in: every command a person or CI runs. `./scripts/bootstrap RECIPE` sets up first.
set shell := ["bash", "-euo", "pipefail", "-c"]

py := ".venv/bin/python"

# list the recipes
default:
    @just --list

# create .venv and install undertow with its dev tools
setup:
    ./scripts/bootstrap --list >/dev/null

# the default chaos experiment: local backend, 3 nodes, kill + partition, 60 s; ends with a verdict
run *ARGS:
    @.venv/bin/undertow run {{ARGS}}

# The tests on the shared Kafka cluster, and those on containers, each run on one worker
# (tests/xdist_groups.py); `just test -n 0` runs in one process.
# lint, then the whole suite on two workers (starts Docker and installs Chromium when missing)
test *ARGS: lint docker-up browser
    {{py}} -m pytest -n 2 --dist loadgroup --durations=25 {{ARGS}}

# fast tests only (no clusters, no Spark, no docker, no Kafka)
test-fast *ARGS:
    {{py}} -m pytest -m "not slow and not docker and not ssh and not browser and not kafka" {{ARGS}}

# The nightly runs them (exhaustive sweeps, the other Kafka client of each end-to-end pair).
# what the default suite leaves out: soak tests and nightly variants
test-soak *ARGS:
    {{py}} -m pytest --soak -m "soak or nightly" {{ARGS}}

# the whole suite N times beside a CPU hog on every core; lists each test that failed once
flake-hunt *ARGS:
    ./scripts/flake-hunt {{ARGS}}

# ruff and mypy
lint:
    .venv/bin/ruff check .
    .venv/bin/mypy

# check run folders: just check results/latest
check +RUNS:
    .venv/bin/undertow check {{RUNS}}

# all benchmarks (writes bench/out/)
bench:
    {{py}} -m bench.checker
    {{py}} -m bench.broker
    {{py}} -m bench.harness
    {{py}} -m bench.report
    {{py}} -m bench.failover
    {{py}} -m bench.groups
    {{py}} -m bench.kafka

# time to find each known bug: seeded runs of every scenario (long: minutes per run)
bench-findbugs *ARGS:
    {{py}} -m bench.findbugs {{ARGS}}

# Apache Kafka's jars from Maven Central into ~/.cache/undertow/kafka/<version> (once): just kafka-jars --kafka-version 3.9.1
kafka-jars *ARGS:
    .venv/bin/undertow image kafka {{ARGS}}

# a run on Apache Kafka: just kafka --scenario kafka-acks-1, just kafka --backend docker (any undertow run option)
kafka *ARGS:
    .venv/bin/undertow run --system kafka {{ARGS}}

# the Kafka node image of the docker backend (Debian's JRE + the cached jars; root, a few minutes once)
kafka-image:
    .venv/bin/undertow image build --system kafka --no-sshd

# install and start the Docker engine if it is missing
docker-up:
    ./scripts/docker-up

# Debian's chromium for the report tests
browser:
    ./scripts/browser-up

# the nightly matrix of scenarios on the docker backend, as CI runs it
nightly *ARGS:
    {{py}} -m harness.nightly {{ARGS}}

# KIP-966's last replica standing and acks=1 on three Kafka releases, with controls:
# one page (results/matrix/matrix.html); started again, it runs only what is missing
matrix *ARGS:
    {{py}} -m harness.cli matrix --scenario kafka-last-replica-standing --scenario kafka-acks-1 --kafka-versions 3.9.1,4.0.2,4.1.2 --control {{ARGS}}
