#!/bin/sh
# Invokes an action through herdr and waits for its result line: sh scripts/run-action.sh ACTION [TIMEOUT_S]
# Prints the HERDR_SANDBOX_RESULT line plus the action's stderr; exits 0 when ok is true.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
exec "$here/bin/airlock" herdr run-action "$@"
