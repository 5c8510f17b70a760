#!/bin/sh
# timeout.sh: run.sh, ended as meson ends a test that ran out of time,
# stops its PostgreSQL server. meson sends SIGTERM to the test's process
# group and, when the test is still there 0.5 s later, SIGKILL; pg_ctl
# starts the server in a session of its own, which neither signal
# reaches. Before run.sh's traps, every such timeout left a server running.
# Exits 77 (skip) when run.sh does: the server binaries are not installed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/berth-pg-timeout-XXXXXX)
chmod 755 "$work"
run=
data=
cleanup() {
	[ -n "$run" ] && kill -KILL "-$run" 2>/dev/null
	# A server left behind (the failure this test is for): stop it. And
	# the folder run.sh made for it, should meson's SIGKILL have cut its
	# removal short.
	if [ -n "$data" ]; then
		[ -f "$data/postmaster.pid" ] && "$here/pgctl.sh" stop "${data%/data}" 0
		case $data in /tmp/berth-pg-*/pg/data) rm -rf "${data%/pg/data}" ;; esac
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# gone PID: the process has ended. A zombie counts: an orphan's is
# reparented to pid 1, which in some containers never reaps.
gone() {
	! kill -0 "$1" 2>/dev/null ||
		[ "$(sed 's/^.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null)" = Z ]
}

# setsid: a process group of run.sh's own, as meson gives a test, whose id
# is run.sh's pid. Its test program says where the server is and waits.
setsid "$here/run.sh" sh -c 'echo "$BERTH_TEST_DB" >"$1.new" && mv "$1.new" "$1" &&
	exec sleep 600' sh "$work/url" >"$work/run.log" 2>&1 &
run=$!
for _ in $(seq 1200); do
	[ -f "$work/url" ] && break
	gone "$run" && break
	sleep 0.1
done
if [ ! -f "$work/url" ]; then
	wait "$run"
	status=$?
	run=
	cat "$work/run.log"
	[ $status -eq 77 ] && exit 77
	echo "FAIL: run.sh did not start its server (exit $status)"
	exit 1
fi
data=$(psql "$(cat "$work/url")" -tAc 'SHOW data_directory')
postmaster=$(head -n 1 "$data/postmaster.pid")
if [ -z "$postmaster" ] || gone "$postmaster"; then
	echo "FAIL: no postmaster in $data"
	exit 1
fi

kill -TERM "-$run"
for _ in 1 2 3 4 5; do
	gone "$run" && break
	sleep 0.1
done
gone "$run" || kill -KILL "-$run"
wait "$run"
run=
for _ in $(seq 600); do
	gone "$postmaster" && break
	sleep 0.1
done
if gone "$postmaster"; then
	echo "ok: run.sh timed out as meson times a test out stopped its server"
	echo "1 passed, 0 failed"
else
	echo "FAIL: the server (pid $postmaster) still ran 60 s after run.sh timed out"
	echo "0 passed, 1 failed"
	exit 1
fi
