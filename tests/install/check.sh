# check.sh, sourced by the tests of this folder that count checks:
#   check NAME CONDITION [ARG...]  evals CONDITION, prints "ok: NAME" or
#                                  "FAIL: NAME" and counts it; a failure
#                                  calls show ARG... (the test's own, to
#                                  print what it saw; by default nothing)
#   summary                        prints the counts, as meson's log shows
#                                  them, and is the test's status
failed=0
passed=0
show() { :; }
check() {
	if eval "$2"; then
		passed=$((passed + 1))
		echo "ok: $1"
	else
		failed=$((failed + 1))
		echo "FAIL: $1"
		shift 2
		show "$@"
	fi
}
summary() {
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}
