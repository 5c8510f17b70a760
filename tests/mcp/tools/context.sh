#!/bin/sh
# mcp-context: answers {"userId"} of the request context it was given.
exec jq -c '{output: {userId: .requestContext.userId}}'
