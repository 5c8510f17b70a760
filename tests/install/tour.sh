#!/bin/sh
# tour.sh SRC BERTHD BERTH: the README's tour, followed literally. It
# starts berthd as ./dev run does (the example tools, a fresh database),
# sets BERTH_SOCKET and berth as the two lines ./dev run prints would, and
# runs the tour's lines one by one from the clone's folder, in order, with
# ID standing for the id of the job the last `submit` printed (as a reader
# copies it). Each line must exit 0, but the one that validates
# bad-weather.json (1: invalid) and the one that follows the event log
# (stopped after 3 s, as a reader would press Ctrl-C).
set -u
src=$1
berthd=$2
berth_bin=$3
work=$(mktemp -d /tmp/berth-tour-XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid"
	rm -rf "$work"
}
trap cleanup EXIT
# sh runs the EXIT trap on exit, not when a signal ends it: meson's
# timeout (SIGTERM), Ctrl-C and a closed terminal become exits, so that
# berthd is stopped then too.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
failed=0
passed=0

sed -n '/^## A tour/,/^## /p' "$src/README.md" |
	sed -n '/^```sh$/,/^```$/p' | sed '1d;$d' >"$work/tour"
if ! grep -q '^\$berth validate' "$work/tour"; then
	echo "FAIL: no tour found in README.md"
	exit 1
fi

"$berthd" --db "$work/berth.db" --socket "$work/berth.sock" \
	--tools "$src/examples/tools" --quiet >"$work/berthd.log" 2>&1 &
pid=$!
export BERTH_SOCKET="$work/berth.sock"
berth=$berth_bin
for _ in $(seq 600); do
	"$berth" info >/dev/null 2>&1 && break
	sleep 0.1
done

cd "$src" || exit 1
id=
while IFS= read -r line; do
	case $line in
	'' | '#'* | export\ BERTH_SOCKET=* | berth=*) continue ;;
	esac
	# The comment at the end of a line is the reader's, not the shell's.
	cmd=$(printf '%s' "$line" | sed 's/[[:space:]]*#[^'"'"'"]*$//')
	cmd=$(printf '%s' "$cmd" | sed "s/ ID\( \|\$\)/ $id\1/")
	want=0
	case $cmd in
	*bad-weather.json*) want=1 ;;
	*--follow*) cmd="timeout 3 $cmd"; want=124 ;;
	esac
	eval "$cmd" >"$work/out" 2>&1
	status=$?
	if [ $status -eq $want ]; then
		passed=$((passed + 1))
		echo "ok: $line"
	else
		failed=$((failed + 1))
		echo "FAIL: $line: exit $status, want $want"
		sed 's/^/    /' "$work/out"
	fi
	case $cmd in
	*' submit '*) id=$(sed -n 's/^id  *//p' "$work/out" | head -n 1) ;;
	esac
	case $line in
	*'submit weather-tool'*)
		grep -q '^status  *completed' "$work/out" || { failed=$((failed + 1)); echo "FAIL: the weather job did not complete"; } ;;
	*'submit ask-name'*)
		grep -q 'What is your name' "$work/out" || { failed=$((failed + 1)); echo "FAIL: ask-name did not ask"; } ;;
	*'wait ID'*)
		grep -q 'Hello, Ada!' "$work/out" || { failed=$((failed + 1)); echo "FAIL: ask-name did not greet Ada"; } ;;
	esac
done <"$work/tour"
# The instance the tour calls valid is one the weather tool takes: the
# example schema is the tool's input (its $comment says so), and it had
# drifted from it (units metric/imperial for the tool's unit C/F).
if "$berth" submit weather-tool "$(cat "$src/examples/instances/seattle.json")" \
	>"$work/out" 2>&1; then
	passed=$((passed + 1))
	echo "ok: the weather tool takes examples/instances/seattle.json"
else
	failed=$((failed + 1))
	echo "FAIL: the weather tool refuses examples/instances/seattle.json"
	sed 's/^/    /' "$work/out"
fi
[ $failed -eq 0 ] || cat "$work/berthd.log"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
