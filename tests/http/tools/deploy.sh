#!/bin/sh
# deploy: the approval tool of the HTTP tests; it only echoes its input.
exec jq -c '{output: {deployed: .input.service}}'
