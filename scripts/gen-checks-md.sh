#!/bin/sh
# Concatenates the check documentation fragments into docs/checks.md.
set -eu
first=1
for f in "$@"; do
    [ $first -eq 1 ] || printf '\n'
    first=0
    cat "$f"
done
