#!/bin/sh
# count: the progress tool of the HTTP tests.
set -eu
line=$(cat)
to=$(printf '%s' "$line" | jq -r '.input.to')
delay=$(printf '%s' "$line" | jq -r '.input.delayMs')
sleep_s=$(awk -v ms="$delay" 'BEGIN { printf "%.3f", ms / 1000 }')
i=0
while [ "$i" -lt "$to" ]; do
	sleep "$sleep_s"
	i=$((i + 1))
	printf '{"progress":{"progress":%d,"total":%d,"message":"counted to %d"}}\n' "$i" "$to" "$i"
done
printf '{"output":{"counted":%d}}\n' "$to"
