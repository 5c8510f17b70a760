#!/bin/sh
cat >/dev/null
echo "this is not json"
sleep 30
