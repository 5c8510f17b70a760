#!/bin/sh
# hangup.sh SRC BERTHD BERTH: tour.sh, hung up while its berthd serves (the
# terminal it runs in closed: SIGHUP to its whole process group), stops
# that berthd. berthd takes SIGHUP as "read the tools again" and serves
# on, so only tour.sh's traps can stop it: before them sh died of the
# signal without running its EXIT trap, and berthd ran on for good.
set -u
src=$1
berthd=$2
berth=$3
work=$(mktemp -d /tmp/berth-hangup-XXXXXX)
tour=
pid=
cleanup() {
	[ -n "$tour" ] && kill -KILL "-$tour" 2>/dev/null
	# A berthd left behind (the failure this test is for): kill it and
	# remove the folder tour.sh made for it.
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		dir=$(tr '\0' '\n' <"/proc/$pid/cmdline" | sed -n '/^--db$/{n;p;}')
		kill -KILL "$pid" 2>/dev/null
		case $dir in /tmp/berth-tour-*/berth.db) rm -rf "${dir%/berth.db}" ;; esac
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# gone PID: the process has ended. A zombie counts: it is reparented to
# pid 1, which in some containers never reaps.
gone() {
	! kill -0 "$1" 2>/dev/null ||
		[ "$(sed 's/^.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null)" = Z ]
}

# setsid: a process group of tour.sh's own, as a terminal gives the job
# it runs, whose id is tour.sh's pid. env --default-signal: SIGHUP as a
# terminal's shell has it, even when this test was started with it
# ignored (nohup): a shell cannot trap a signal ignored at its start.
setsid env --default-signal=HUP sh "$src/tests/install/tour.sh" "$src" \
	"$berthd" "$berth" >"$work/tour.log" 2>&1 &
tour=$!
# Hang up once berthd has answered (the tour's first line passed).
for _ in $(seq 1200); do
	grep -q '^ok: ' "$work/tour.log" && break
	gone "$tour" && break
	sleep 0.1
done
pid=$(pgrep -P "$tour" -x berthd)
if [ -z "$pid" ] || ! grep -q '^ok: ' "$work/tour.log"; then
	echo "FAIL: tour.sh's berthd did not serve"
	cat "$work/tour.log"
	exit 1
fi
kill -HUP "-$tour"
wait "$tour"
status=$?
tour=
# 129: ended by the hangup (the old tour.sh died of it, the new one exits
# with its number), not done by itself before it came.
if [ $status -ne 129 ]; then
	echo "FAIL: tour.sh exited $status, not 129, as if never hung up"
	cat "$work/tour.log"
	exit 1
fi
for _ in $(seq 600); do
	gone "$pid" && break
	sleep 0.1
done
if gone "$pid"; then
	echo "ok: tour.sh hung up stopped its berthd"
	echo "1 passed, 0 failed"
else
	echo "FAIL: berthd (pid $pid) still ran 60 s after tour.sh was hung up"
	echo "0 passed, 1 failed"
	exit 1
fi
