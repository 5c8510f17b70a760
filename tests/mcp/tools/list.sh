#!/bin/sh
# mcp-list: answers [1, ..., n].
exec jq -c '{output: [range(1; .input.n + 1)]}'
