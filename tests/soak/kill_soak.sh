#!/bin/sh
# Kill soak (durable state, exactly once): SIGKILL `baton run` at random moments under a stream of turns,
# N times (default 1000), then check that no turn was lost and that every duplicate is
# a replay (at most one per kill). Prints the counts.
#
#   tests/soak/kill_soak.sh [CYCLES]        BATON_TEST_SEED=... to repeat a run
set -eu
cd "$(dirname "$0")/../.."
BATON_KILL_CYCLES="${1:-1000}" exec cargo test --release --test integration -- \
    --ignored --exact state::kill_soak --nocapture
