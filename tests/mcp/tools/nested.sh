#!/bin/sh
# mcp-nested: suspends until resumed, then returns the resume data.
exec jq -c 'if .resumeData then {output: .resumeData} else {suspend: {question: "Where do you live?"}} end'
