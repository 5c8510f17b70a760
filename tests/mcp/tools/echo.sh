#!/bin/sh
# mcp-echo: {"input": {"text"}} on stdin, {"output": {"text", "length"}} out.
exec jq -c '{output: {text: .input.text, length: (.input.text | length)}}'
