#!/bin/sh
# ask-name: suspends with a question until resumed with {"answer"}. The
# greeting is always there: berth fills in its default ("Hello").
exec jq -c 'if .resumeData then
  {output: {message: "\(.input.greeting), \(.resumeData.answer)!"}}
else
  {suspend: {question: "What is your name?"}}
end'
