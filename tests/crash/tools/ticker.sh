#!/bin/sh
# ticker: appends the pid of its ticking process to .input.file every
# 100 ms for .input.seconds (15 unless given), then answers. The ticking
# process is a child of the tool's own, in its group: when only the tool's
# own process is killed (as PR_SET_PDEATHSIG kills it with berthd), the
# ticking goes on.
line=$(cat)
f=$(printf '%s' "$line" | jq -r '.input.file')
s=$(printf '%s' "$line" | jq -r '.input.seconds // 15')
sh -c 'i=0; while [ $i -lt $(($2 * 10)) ]; do echo $$ >> "$1"; sleep 0.1; i=$((i + 1)); done' ticker "$f" "$s" &
wait $!
echo '{"output":{}}'
