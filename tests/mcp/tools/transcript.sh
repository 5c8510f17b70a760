#!/bin/sh
# mcp-transcript: suspends with a question and an apiKey; resumed, returns
# the answer as its name, with the apiKey.
exec jq -c 'if .resumeData then
  {output: {apiKey: "sk-live-7f3c9d2a-OUT", name: .resumeData.answer}}
else
  {suspend: {question: "Name?", apiKey: "sk-live-7f3c9d2a-SUSP"}}
end'
