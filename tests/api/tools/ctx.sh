#!/bin/sh
# api-ctx: answers with the request context it got (its defaults filled in).
exec jq -c '{output: {requestContext: .requestContext}}'
