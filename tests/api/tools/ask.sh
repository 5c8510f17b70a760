#!/bin/sh
# api-ask: suspends with {"question"} until resumed with {"answer"}.
exec jq -c 'if .resumeData then
  {output: {question: .input.question, answer: .resumeData.answer}}
else
  {suspend: {question: .input.question}}
end'
