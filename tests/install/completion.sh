#!/bin/bash
# completion.sh COMPLETION_FILE: berth's bash completion, driven as bash
# drives it (COMP_WORDS, COMP_CWORD, COMP_LINE), against the built berth
# ($BERTH) and a real berthd ($BERTHD, with the example tools) for tool
# names and job ids. It runs once with bash's bare completion and once more
# with the bash-completion package's helpers when they are installed.
set -u
completion=$1
dir=$(mktemp -d /tmp/berth-completion-XXXXXX)
sock=$dir/berth.sock
failed=0
passed=0
pid=
cleanup() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid"
	rm -rf "$dir"
}
trap cleanup EXIT

# complete WORD...: the completions of a line ending in WORD (the last
# argument, "" for a new word), one per line, sorted.
complete() {
	COMP_WORDS=("$BERTH" "$@")
	COMP_CWORD=$#
	COMP_LINE="${COMP_WORDS[*]}"
	COMP_POINT=${#COMP_LINE}
	COMPREPLY=()
	_berth "$BERTH" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
	[ ${#COMPREPLY[@]} -gt 0 ] && printf '%s\n' "${COMPREPLY[@]}" | sort
}
# expect WHAT WANT WORD...: the completions are exactly WANT (space-separated).
expect() {
	local what=$1 want=$2 got
	shift 2
	got=$(complete "$@" | tr '\n' ' ' | sed 's/ $//')
	if [ "$got" = "$want" ]; then
		passed=$((passed + 1))
		echo "ok: $mode: $what"
	else
		failed=$((failed + 1))
		echo "FAIL: $mode: $what: got '$got', want '$want'"
	fi
}
# has WHAT WANT WORD...: WANT is among the completions.
has() {
	local what=$1 want=$2
	shift 2
	if complete "$@" | grep -qx -- "$want"; then
		passed=$((passed + 1))
		echo "ok: $mode: $what"
	else
		failed=$((failed + 1))
		echo "FAIL: $mode: $what: '$want' not in '$(complete "$@" | tr '\n' ' ')'"
	fi
}

"$BERTHD" --db "$dir/berth.db" --socket "$sock" --tools "$BERTH_EXAMPLES" --quiet \
	>"$dir/berthd.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
	"$BERTH" --socket "$sock" info >/dev/null 2>&1 && break
	sleep 0.1
done
# A job that waits for approval, whose id approve should offer.
note=$("$BERTH" --socket "$sock" --json submit write-note '{"path":"/dev/null","text":"x"}' |
	sed -n 's/^  "id": "\(.*\)",$/\1/p')
[ -n "$note" ] || { echo "FAIL: cannot submit a job"; cat "$dir/berthd.log"; exit 1; }
mkdir "$dir/schemas"
touch "$dir/schemas/a.json" "$dir/schemas/b.txt"

# shellcheck source=/dev/null
. "$completion"
for mode in bare bash-completion; do
	if [ $mode = bash-completion ]; then
		helpers=/usr/share/bash-completion/bash_completion
		if [ ! -f $helpers ]; then
			echo "skip: $mode: $helpers is not installed"
			continue
		fi
		# shellcheck source=/dev/null
		. $helpers
		. "$completion"
	fi
	has "commands from berth --help" submit ""
	has "the help command" help ""
	expect "a command by its start" "submit" sub
	expect "global options" "--help --json --socket --token-file --version" --
	# --token-file's argument is not the command (before: nothing was
	# offered after it), and tools NAME offers the tools.
	expect "a command after --token-file FILE" "submit" --token-file "$dir/tok" sub
	expect "tools for tools NAME" "weather-tool write-note" --socket "$sock" tools w
	has "a command's options from its --help" --wait submit --w
	has "validate's options" --ref validate --r
	expect "tools from berthd" "weather-tool write-note" --socket "$sock" submit w
	expect "tools after --tool" "weather-tool write-note" --socket "$sock" ls --tool w
	expect "jobs awaiting approval for approve" "$note" --socket "$sock" approve ""
	expect "no job for a second argument" "" --socket "$sock" approve "$note" ""
	expect "statuses" "pending" ls --status pend
	expect "the last of a list of statuses" "pending,awaiting_approval" ls --status pending,aw
	expect "event types for events --type" "cancelled completed created" events --type c
	expect "the last of a list of event types" "completed,approval_requested completed,approved" events --type completed,appr
	has "events' --type from its --help" --type events --t
	expect "views" "display" get --view d
	expect "json files and folders for validate" "$dir/schemas/a.json" validate "$dir/schemas/"
	expect "nothing when berthd does not answer" "" --socket "$dir/none.sock" submit ""
done

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
