#!/bin/sh
# api-approve: reports the action as done.
cat >/dev/null
echo '{"output": {"done": true}}'
