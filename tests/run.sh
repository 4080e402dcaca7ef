#!/usr/bin/env bash
# The project's test command (README): installs what is missing, then runs every test tier.
set -euo pipefail
cd "$(dirname "$0")/.."
tests/setup.sh

# Unit and integration tests (real ostree, dbus-daemon, Ignition, kubectl; see README "What is real").
cargo nextest run --workspace --all-targets --no-fail-fast
cargo test --workspace --doc
