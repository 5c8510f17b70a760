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
# cleanup stops the server (if one started) and removes its directory: at
# the exit, and at the signals that end sh without its EXIT trap, which
# become exits. pg_ctl starts the server in a session of its own, out of
# reach of meson's kill of the test's process group on a timeout: before
# these traps, a test that timed out left its server running
# (timeout.sh). meson sends SIGTERM, and SIGKILL to the whole group 0.5 s
# later when the test is still there, pgctl.sh's wait included: so a
# signal first tells the postmaster itself to stop at once (SIGQUIT is
# pg_ctl's immediate shutdown; the cluster is thrown away, and needs no
# checkpoint).
cleanup() {
	"$here/pgctl.sh" stop "$dir/pg" "${port:-0}"
	rm -rf "$dir"
}
on_signal() {
	pm=$(head -n 1 "$dir/pg/data/postmaster.pid" 2>/dev/null) &&
		kill -QUIT "$pm" 2>/dev/null
	exit "$1"
}
trap cleanup EXIT
trap 'on_signal 129' HUP
trap 'on_signal 130' INT
trap 'on_signal 143' TERM
for try in 1 2 3 4 5 6 7 8; do
	p=$(( 20000 + ( $$ * 7 + try * 131 ) % 20000 ))
	out=$("$here/pgctl.sh" start "$dir/pg" "$p" 2>"$dir/pgctl.err")
	rc=$?
	if [ $rc -eq 77 ]; then
		cat "$dir/pgctl.err" >&2
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
	exit 1
fi
BERTH_TEST_DB=$out
export BERTH_TEST_DB
"$@"
