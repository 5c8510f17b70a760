#!/bin/sh
# run.sh PROGRAM [ARGS...]: runs a test program against a private
# PostgreSQL server (pgctl.sh) started for it in a temporary directory on a
# free port, with BERTH_TEST_DB set to its URL; stops and removes it after.
# Exits 77 (skip) only when the PostgreSQL server binaries are absent.
set -u
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/berth-pg-XXXXXX)
chmod 755 "$dir"
port=""
for try in 1 2 3 4 5 6 7 8; do
	p=$(( 20000 + ( $$ * 7 + try * 131 ) % 20000 ))
	out=$("$here/pgctl.sh" start "$dir/pg" "$p" 2>"$dir/pgctl.err")
	rc=$?
	if [ $rc -eq 77 ]; then
		cat "$dir/pgctl.err" >&2
		rm -rf "$dir"
		exit 77
	fi
	if [ $rc -eq 0 ]; then
		port=$p
		break
	fi
	"$here/pgctl.sh" stop "$dir/pg" "$p" >/dev/null 2>&1
done
if [ -z "$port" ]; then
	echo "run.sh: could not start PostgreSQL:" >&2
	cat "$dir/pgctl.err" >&2
	[ -f "$dir/pg/server.log" ] && tail -n 20 "$dir/pg/server.log" >&2
	rm -rf "$dir"
	exit 1
fi
BERTH_TEST_DB=$out
export BERTH_TEST_DB
"$@"
status=$?
"$here/pgctl.sh" stop "$dir/pg" "$port"
rm -rf "$dir"
exit $status
