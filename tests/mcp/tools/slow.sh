#!/bin/sh
# mcp-slow: sleeps, then finishes.
cat >/dev/null
sleep 60
echo '{"output": {"slept": 60}}'
