#!/bin/bash
# Install prime_agent_kernel (from this worktree) into a gateway venv: $1 = venv dir.
set -e
here=$(cd "$(dirname "$0")" && pwd)
build=$(mktemp -d)
cp "$here/kernel_dist/pyproject.toml" "$build/"
cp -r "$here/../kernel_ext/prime_agent_kernel" "$build/"
find "$build" -name __pycache__ -prune -exec rm -rf {} +
nice -n 19 "$1/bin/pip" install "$build"
rm -rf "$build"
