#!/bin/sh
# big-suspend: suspends with {"blob": "aaa..."} of .input.bytes bytes, then
# answers with the blob's length and the resume data.
set -eu
line=$(cat)
if printf '%s' "$line" | jq -e '.resumeData' >/dev/null; then
	printf '%s' "$line" | jq -c '{output: {size: (.suspendPayload.blob | length), answer: .resumeData.answer}}'
	exit 0
fi
n=$(printf '%s' "$line" | jq -r '.input.bytes')
printf '{"suspend":{"blob":"'
head -c "$n" /dev/zero | tr '\0' a
printf '"}}\n'
