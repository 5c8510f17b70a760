#!/bin/sh
# capped: counts the runs under way in .input.dir (one file each, all
# nodes on one machine share it); more than 2 is a broken cluster limit,
# recorded in DIR/exceeded and reported as a failure.
set -eu
line=$(cat)
dir=$(printf '%s' "$line" | jq -r '.input.dir')
ms=$(printf '%s' "$line" | jq -r '.input.ms')
me="$dir/run.$$"
: > "$me"
n=$(ls "$dir" | grep -c '^run\.' || true)
[ "$n" -le 2 ] || echo "$n" >> "$dir/exceeded"
sleep "$(echo "$ms" | awk '{printf "%.3f", $1 / 1000}')"
n=$(ls "$dir" | grep -c '^run\.' || true)
[ "$n" -le 2 ] || echo "$n" >> "$dir/exceeded"
rm -f "$me"
if [ -f "$dir/exceeded" ]; then
	jq -nc '{error: {message: "the cluster-wide concurrency limit of 2 was exceeded"}}'
	exit 1
fi
jq -nc --argjson ms "$ms" '{output: {slept: $ms}}'
