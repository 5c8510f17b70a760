#!/bin/sh
# devrun.sh DEV BERTHD BERTH: `./dev run` with the real berthd (meson,
# ninja and dpkg-query are stubs in a scratch copy of dev, and the "built"
# berthd and berth are these), as a terminal runs it:
#   - hung up (the terminal closed: SIGHUP to its process group) it stops
#     its berthd. berthd takes SIGHUP as "read the tools again", so before,
#     when dev exec'd it, berthd served on for good;
#   - Ctrl-C (SIGINT to the group) stops berthd cleanly, and dev exits 0;
#   - a second ./dev run on the same database and socket prints no lines
#     to paste (they would point at the first berthd) and exits with
#     berthd's 1; a usage error the same, with 2.
set -u
dev=$1
berthd=$2
berth=$3
work=$(mktemp -d /tmp/berth-devrun-XXXXXX)
clone=$work/clone
runs=
# shellcheck source=check.sh
. "$(dirname "$0")/check.sh"
cleanup() {
	# A berthd left behind (the failure this test is for): the pid its
	# lock file names, only while it runs on this test's database.
	for db in "$work"/*.db; do
		[ -f "$db.lock" ] || continue
		p=$(cat "$db.lock" 2>/dev/null)
		[ -n "$p" ] && [ -r "/proc/$p/cmdline" ] &&
			tr '\0' '\n' <"/proc/$p/cmdline" | grep -qx "$db" &&
			kill -KILL "$p" 2>/dev/null
	done
	for r in $runs; do kill -KILL "-$r" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
show() {
	[ -n "${1:-}" ] && { echo "---- its output ----"; cat "$1"; }
}
# gone PID: the process has ended. A zombie counts: it is reparented to
# pid 1, which in some containers never reaps.
gone() {
	! kill -0 "$1" 2>/dev/null ||
		[ "$(sed 's/^.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null)" = Z ]
}

mkdir -p "$work/bin" "$clone/examples"
cp "$dev" "$clone/dev"
cp -r "$(dirname "$dev")/examples/tools" "$clone/examples/"
cat >"$work/bin/dpkg-query" <<'STUB'
#!/bin/sh
echo "install ok installed"
STUB
cat >"$work/bin/meson" <<'STUB'
#!/bin/sh
mkdir -p "$2" && : >"$2/build.ninja"
STUB
cat >"$work/bin/ninja" <<STUB
#!/bin/sh
mkdir -p build/berthd build/cli
printf '#!/bin/sh\nexec "%s" "\$@"\n' "$berthd" >build/berthd/berthd
printf '#!/bin/sh\nexec "%s" "\$@"\n' "$berth" >build/cli/berth
chmod +x build/berthd/berthd build/cli/berth
STUB
chmod +x "$work/bin/"*

# start NAME ARGS...: ./dev run ARGS in a process group of its own (as a
# terminal gives its job; its id is $run), with HUP and INT as a
# terminal's shell has them, even when this test was started with them
# ignored; its output in $work/NAME.log. Returns once it printed the
# lines to paste and berthd's lock names a pid ($pid), or dev ended.
start() {
	log=$work/$1.log
	shift
	setsid env --default-signal=HUP,INT PATH="$work/bin:$PATH" \
		sh "$clone/dev" run "$@" >"$log" 2>&1 </dev/null &
	run=$!
	runs="$runs $run"
	pid=
	for _ in $(seq 600); do
		gone "$run" && break
		if grep -q '^export BERTH_SOCKET=' "$log" && [ -S "$work/b.sock" ]; then
			pid=$(cat "$work/b.db.lock" 2>/dev/null)
			[ -n "$pid" ] && break
		fi
		sleep 0.1
	done
}
# ended PID: PID has gone within 30 s.
ended() {
	for _ in $(seq 300); do
		gone "$1" && return 0
		sleep 0.1
	done
	return 1
}

# ---- hung up ----
start hup --db "$work/b.db" --socket "$work/b.sock"
check "./dev run serves" '[ -n "$pid" ]' "$work/hup.log"
if [ -n "$pid" ]; then
	kill -HUP "-$run"
	check "hung up, ./dev run stops its berthd" 'ended "$pid"' "$work/hup.log"
	ended "$run"
	[ -f "$work/b.db.lock" ] && ! gone "$pid" && kill -KILL "$pid" 2>/dev/null
fi

# ---- a second one on the same database and socket; then Ctrl-C ----
start first --db "$work/b.db" --socket "$work/b.sock"
first=$run
first_pid=$pid
if [ -n "$first_pid" ]; then
	(cd "$work" && PATH="$work/bin:$PATH" timeout 60 sh "$clone/dev" run \
		--db ./b.db --socket ./b.sock >"$work/second.log" 2>&1 </dev/null)
	status=$?
	check "a second ./dev run on a database in use: no lines to paste, berthd's status 1" \
		'[ $status -eq 1 ] && ! grep -q -e "berthd serves" -e BERTH_SOCKET "$work/second.log" &&
		 grep -q "in use" "$work/second.log"' "$work/second.log"
	kill -INT "-$first"
	wait "$first"
	status=$?
	check "Ctrl-C stops berthd, and ./dev run exits 0 as berthd does" \
		'ended "$first_pid" && [ $status -eq 0 ]' "$work/first.log"
else
	check "./dev run serves (a second time)" false "$work/first.log"
fi

# ---- a usage error ----
(cd "$work" && PATH="$work/bin:$PATH" timeout 60 sh "$clone/dev" run --db ./u.db \
	--socket ./u.sock --workers x >"$work/usage.log" 2>&1 </dev/null)
status=$?
check "a usage error: no lines to paste, berthd's status 2" \
	'[ $status -eq 2 ] && ! grep -q -e "berthd serves" -e BERTH_SOCKET "$work/usage.log"' \
	"$work/usage.log"

summary
