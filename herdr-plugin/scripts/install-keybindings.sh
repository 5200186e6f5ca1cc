#!/bin/sh
# Adds the four key bindings to herdr's config.toml, checks it and reloads it (the
# install-keybindings action does the same from inside herdr).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
exec "$here/bin/airlock" herdr action install-keybindings
