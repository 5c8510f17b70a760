#!/bin/sh
# write-note: writes .input.text to .input.path (approval was given before
# this runs at all).
set -eu
line=$(cat)
path=$(printf '%s' "$line" | jq -r '.input.path')
printf '%s' "$line" | jq -j '.input.text' > "$path"
bytes=$(wc -c < "$path" | tr -d ' ')
jq -nc --arg path "$path" --argjson bytes "$bytes" \
	'{output: {path: $path, bytes: $bytes}}'
