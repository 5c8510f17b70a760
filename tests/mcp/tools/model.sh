#!/bin/sh
# mcp-model: an output and a modelOutput.
cat >/dev/null
echo '{"output": {"value": 42}, "modelOutput": "The answer is 42."}'
