#!/bin/sh
# suspend.sh: berthd writes the job as one JSON line on stdin (worker/proc.c).
# The first run suspends; a run with resumeData completes with it.
exec jq -c 'if has("resumeData") then {output: {resumed: .resumeData}}
            else {suspend: {waitingFor: "resume"}} end'
