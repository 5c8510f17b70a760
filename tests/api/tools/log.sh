#!/bin/sh
# api-log: one structured log line, one line of stderr, then an output.
cat >/dev/null
echo '{"log": {"level": "info", "message": "hello from the tool", "step": 1}}'
echo 'warming up' >&2
echo '{"output": {"logged": true}}'
