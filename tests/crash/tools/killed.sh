#!/bin/sh
cat >/dev/null
echo "{\"progress\":{\"progress\":1}}"
kill -9 $$
