#!/bin/sh
# ask-name: suspends with a question until resumed with {"answer"}.
exec jq -c 'if .resumeData then
  {output: {message: "\(.input.greeting // "Hello"), \(.resumeData.answer)!"}}
else
  {suspend: {question: "What is your name?"}}
end'
