#!/bin/sh
# mcp-approve: reports the action as done.
exec jq -c '{output: {done: true, action: .input.action}}'
