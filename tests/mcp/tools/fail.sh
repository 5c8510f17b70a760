#!/bin/sh
# mcp-fail: a final error line.
cat >/dev/null
echo '{"error": {"message": "the tool failed on purpose", "retryable": false}}'
