#!/bin/sh
# count-to: counts to .input.to, starting after .checkpoint.i when a
# previous run saved one. .input.delayMs is always there: berth fills in
# its default (100).
set -eu
line=$(cat)
to=$(printf '%s' "$line" | jq -r '.input.to')
delay=$(printf '%s' "$line" | jq -r '.input.delayMs')
attempt=$(printf '%s' "$line" | jq -r '.attempt')
from=$(printf '%s' "$line" | jq -r '.checkpoint.i // 0')
sleep_s=$(awk -v ms="$delay" 'BEGIN { printf "%.3f", ms / 1000 }')
i=$from
while [ "$i" -lt "$to" ]; do
	sleep "$sleep_s"
	i=$((i + 1))
	printf '{"checkpoint":{"i":%d}}\n' "$i"
	printf '{"progress":{"progress":%d,"total":%d,"message":"counted to %d"}}\n' "$i" "$to" "$i"
done
printf '{"log":{"level":"info","message":"done","from":%d}}\n' "$from"
printf '{"output":{"counted":%d,"resumedFrom":%d,"attempt":%d}}\n' "$to" "$from" "$attempt"
