#!/bin/sh
# book-trip: suspends with a question, then books with the resume data.
exec jq -c 'if .resumeData then
  {output: {booked: .input.destination, details: .resumeData}}
else
  {suspend: {question: "Who travels to \(.input.destination), and how?"}}
end'
