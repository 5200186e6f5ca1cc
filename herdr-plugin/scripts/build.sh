#!/bin/sh
# The manifest's build step (herdr plugin install runs it; after herdr plugin link, run it yourself):
# builds airlock from the repository this directory lives in and places it at bin/airlock, so the
# manifest's commands do not depend on herdr's PATH.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$here/.." && pwd)
if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo was not found: install Rust (https://rustup.rs), then run sh scripts/build.sh again." >&2
    exit 1
fi
# As airlock ships: statically linked where the host allows (scripts/cargo-static).
sh "$repo/scripts/cargo-static" build --release --locked --manifest-path "$repo/Cargo.toml" -p airlock
mkdir -p "$here/bin"
cp "$(sh "$repo/scripts/cargo-static" --out-dir)/airlock" "$here/bin/airlock.tmp"
mv "$here/bin/airlock.tmp" "$here/bin/airlock"
echo "installed $here/bin/airlock"
