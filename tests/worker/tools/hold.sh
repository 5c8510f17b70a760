#!/bin/sh
# hold: ignores SIGTERM (so does the sleep it starts), writes its pid to
# .input.pidFile, sleeps .input.seconds, then answers.
in=$(cat)
p=$(printf '%s' "$in" | jq -r '.input.pidFile')
s=$(printf '%s' "$in" | jq -r '.input.seconds')
trap '' TERM
echo $$ > "$p"
sleep "$s"
echo "{\"output\":{\"slept\":$s}}"
