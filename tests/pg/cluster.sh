#!/bin/sh
# cluster.sh BUILD_DIR: three berthd nodes on one PostgreSQL database
# ($BERTH_TEST_DB, from run.sh). Checks, with the berth CLI:
#   0. jobs one node starts at their submission make the others ask no
#      claim (node b's berth_claims_total, from its /metrics);
#   1. jobs submitted on one node are run by all three;
#   2. a suspended job is resumed through another node than its own, and
#      jobs/wait on a third returns when it completes;
#   3. a node killed with SIGKILL while running jobs (it reports them as
#      busy workers first): the others finish them once the leases
#      expire, nothing lost;
#   4. a tool's cluster-wide concurrency limit (2) is never exceeded, as
#      the tool itself checks (tools/capped.sh);
#   5. a tool limited to one run at a time runs forty queued jobs one
#      after the other with nothing else to wake the nodes: each run's end
#      claims the next, although the claim its freed slot asked for may
#      have been taken ahead of the run's final commit and counted it;
#   6. berth events --type completed reads the completed events alone on
#      the nodes still running, as many as the database holds.
#   (7, 8: the log's format; the server out of reach: writes and reads
#      answered -32014 saying so.)
#   9. a node killed with SIGKILL while running a job of a tool only it
#      has: the others leave the job running, and a node started with
#      the tool runs it again (its URL's password= shown as ***);
#  10. the end of a run that meets its job at another attempt (the same
#      node's new claim of it, made directly in the database here) is
#      dropped, not stored as that attempt's result;
#  11. a job waiting for approval with a ttl, on a node then killed, is
#      expired by the others at its expiresAt;
#  12. --cluster-workers bounds the jobs running at once over the nodes
#      that set it.
set -u
build=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
dir=$(mktemp -d /tmp/berth-cluster-XXXXXX)
fail=0
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	sleep 1
	rm -rf "$dir"
}
trap cleanup EXIT
# sh runs the EXIT trap on exit, not when a signal ends it: meson's
# timeout (SIGTERM), Ctrl-C and a closed terminal become exits, so that
# the nodes are stopped then too.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
db=$(echo "$BERTH_TEST_DB" | sed 's|/[^/]*$|/cluster|')
psql "$BERTH_TEST_DB" -qc "DROP DATABASE IF EXISTS cluster WITH (FORCE)" -c "CREATE DATABASE cluster" >/dev/null 2>&1
q() { psql "$db" -tAc "$1"; }
berth() { node=$1; shift; "$build/cli/berth" --socket "$dir/$node.sock" "$@"; }
check() { if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: got '$2', want '$3'"; fail=1; fi; }
# poll_q WANT TRIES SQL runs SQL every 0.1 s until it gives WANT, at most
# TRIES times, and prints what it gave last.
poll_q() {
	got=$(q "$3") tries=1
	while [ "$got" != "$1" ] && [ $tries -lt "$2" ]; do
		sleep 0.1
		tries=$((tries+1))
		got=$(q "$3")
	done
	echo "$got"
}

mkdir -p "$dir/tools" "$dir/cap"
cp "$root"/examples/tools/* "$here"/tools/* "$dir/tools/"
# start NODE [ARG...]: a node, with ARGs of berthd's own.
start() {
	node=$1
	shift
	BERTH_NODE=$node BERTH_LEASE_MS=1500 ASAN_OPTIONS=detect_leaks=0 \
		"$build/berthd/berthd" --db "${dburl:-$db}" --socket "$dir/$node.sock" \
		--tools "$dir/tools" --workers 3 --quiet "$@" >>"$dir/$node.log" 2>&1 &
	eval "pid_$node=$!"
	pids="$pids $!"
}
# Node b serves /metrics too (step 0).
start a
start b --http 127.0.0.1:0 --http-open
start c
for n in a b c; do
	i=0
	while ! berth $n info >/dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
done

# 0. jobs that node a starts at their submission ask node b for no claim:
# their "created" and "started" events reach b in one delivery, and a
# claim for each found nothing (1.53 statements a no-op job on two nodes
# instead of 1.31).
port=$(sed -n 's|.*serving http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$dir/b.log" | head -n 1)
claims() {
	python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())' \
		"http://127.0.0.1:$port/metrics" | awk '$1 == "berth_claims_total" { print $2 }'
}
before=$(claims)
for i in 1 2 3 4 5 6 7 8 9 10; do
	berth a submit noop '{}' >/dev/null
done
poll_q 10 100 "SELECT count(*) FROM jobs WHERE tool = 'noop' AND status = 4" >/dev/null
sleep 0.5
after=$(claims)
echo "node b: berth_claims_total $before before node a's ten jobs, $after after"
check "node b asked at most 2 claims for ten jobs node a started at their submission" \
	"$([ -n "$before" ] && [ -n "$after" ] && [ $((after - before)) -le 2 ] && echo yes)" yes
check "node a started them at their submission" \
	"$(q "SELECT count(*) FROM jobs WHERE tool = 'noop' AND started_at = created_at")" 10

# 1. spread: nine jobs long enough to be running together on the nine
# slots (three a node), so node a alone (three slots) cannot hold them.
ids=""
for i in 1 2 3 4 5 6 7 8 9; do
	ids="$ids $(berth a --json submit sleep '{"ms":6000}' | jq -r .id)"
done
owners=$(poll_q 3 100 "SELECT count(DISTINCT lease_owner) FROM jobs WHERE status = 2")
check "jobs submitted on node a run on all three nodes" "$owners" 3
for id in $ids; do berth c wait "$id" >/dev/null; done
check "all nine completed" "$(q "SELECT count(*) FROM jobs WHERE tool = 'sleep' AND status = 4")" 9

# 2. resume through another node, wait on a third
id=$(berth a --json submit ask-name '{}' | jq -r .id)
poll_q 3 100 "SELECT status FROM jobs WHERE id = '$id'" >/dev/null
berth c wait "$id" --until completed --timeout 60s >/dev/null &
waiter=$!
berth b resume "$id" '{"answer":"Ann"}' >/dev/null
wait $waiter
check "resumed through node b, completed" "$(q "SELECT status FROM jobs WHERE id = '$id'")" 4
check "the wait on node c returned the completed job" "$(berth c --json get "$id" | jq -r .output.message | grep -c Ann)" 1

# 3. SIGKILL a node with running jobs. The jobs (about 10 s each, with a
# checkpoint every 200 ms) are all running before the kill, and the victim
# says so itself (server/info: busy workers), so the kill hits running work.
ids=""
for i in 1 2 3 4 5 6; do
	ids="$ids $(berth b --json submit count-to '{"to":50,"delayMs":200}' | jq -r .id)"
done
poll_q 6 150 "SELECT count(*) FROM jobs WHERE tool = 'count-to' AND status = 2" >/dev/null
victim=$(q "SELECT lease_owner FROM jobs WHERE tool = 'count-to' AND status = 2 GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1")
if [ -z "$victim" ]; then
	echo "FAIL: no count-to job was running 15 seconds after its submission"
	exit 1
fi
busy=$(berth "$victim" --json info | jq -r .workers.busy)
running=$(q "SELECT count(*) FROM jobs WHERE status = 2 AND lease_owner = '$victim'")
if [ "$busy" -lt 1 ] || [ "$busy" != "$running" ]; then
	echo "FAIL: node $victim reports $busy busy workers, the database $running running jobs"
	exit 1
fi
eval "vp=\$pid_$victim"
kill -9 "$vp"
echo "killed node $victim with $running running jobs"
other=a; [ "$victim" = a ] && other=b
for id in $ids; do berth $other wait "$id" --timeout 60000 >/dev/null 2>&1 || berth $other wait "$id" >/dev/null; done
check "every job of the killed node completed elsewhere" \
	"$(q "SELECT count(*) FROM jobs WHERE tool = 'count-to' AND status = 4")" 6
check "the killed node's jobs were retried" \
	"$(q "SELECT count(*) FROM jobs WHERE tool = 'count-to' AND attempt > 1")" "$running"

# 4. cluster-wide concurrency limit
ids=""
for i in 1 2 3 4 5 6 7 8 9 10; do
	n=a; [ $((i % 3)) = 1 ] && n=c
	[ "$victim" = "$n" ] && n=$other
	ids="$ids $(berth $n --json submit capped "{\"dir\":\"$dir/cap\",\"ms\":400}" | jq -r .id)"
done
for id in $ids; do berth $other wait "$id" >/dev/null; done
check "the capped tool never saw more than 2 runs at once" "$([ -f "$dir/cap/exceeded" ] && cat "$dir/cap/exceeded" | head -1 || echo none)" none
check "all ten capped jobs completed" "$(q "SELECT count(*) FROM jobs WHERE tool = 'capped' AND status = 4")" 10

# 5. one run at a time: queued while paused, so that after the unpause
# only the runs' ends ask for claims. Before the fix two of forty ran in
# ten seconds; now all of them in about one.
berth $other pause one-at-a-time >/dev/null
for i in $(seq 40); do berth $other --json submit one-at-a-time '{}' >/dev/null; done
berth $other unpause one-at-a-time >/dev/null
left=$(poll_q 0 300 "SELECT count(*) FROM jobs WHERE tool = 'one-at-a-time' AND status <> 4")
check "forty jobs of a tool limited to one run at a time all completed" "$left" 0

# 6. events by type: each node still running reads the completed events
# of the whole cluster's log, and those alone (events/poll's types, read
# by type in PostgreSQL), as the database holds them.
want=$(q "SELECT count(*) FROM events WHERE type = 8")
for n in a b c; do
	[ "$n" = "$victim" ] && continue
	got=$(berth $n --json events --type completed | jq -r .type | sort | uniq -c | awk '{print $2 ":" $1}')
	check "node $n reads the $want completed events alone" "$got" "completed:$want"
done

# 7. The log keeps its format: the server's notices (the migrations' "...
# already exists, skipping" at every start after the first) are not
# printed by libpq on stderr (before: five NOTICE lines a start).
check "no node's log holds a raw NOTICE line" \
	"$(cat "$dir"/a.log "$dir"/b.log "$dir"/c.log | grep -c '^NOTICE:')" 0

# 8. The server out of reach: a submit is refused -32014 at once, and says
# that a commit under way when the connection went may have been made (a
# submit answered so could be in the database after all: the audit saw it
# run), with data.committed "unknown" (before: "nothing was changed").
pgdir=$(psql "$BERTH_TEST_DB" -tAc 'SHOW data_directory')
pgdir=${pgdir%/data}
pgport=$(printf '%s' "$BERTH_TEST_DB" | sed -n 's|.*:\([0-9]*\)/.*|\1|p')
"$here/pgctl.sh" stop "$pgdir" "$pgport" >/dev/null 2>&1
live=a
[ "$victim" = a ] && live=b
out=$(berth $live --json submit noop '{}' 2>&1)
check "a submit while PostgreSQL is down is refused -32014" \
	"$(printf '%s' "$out" | jq -r '.error.code // .code // empty' 2>/dev/null | head -n 1)" -32014
check "... saying the commit's outcome is unknown" \
	"$(printf '%s' "$out" | jq -r '(.error.data // .data).committed // empty' 2>/dev/null | head -n 1)" unknown
# A read says so too, as a write does (before: "storage failure: disk I/O
# error", data.sqlite alone, as on SQLite).
out=$(berth $live --json get "$id" 2>&1)
check "a read while PostgreSQL is down says PostgreSQL could not be reached" \
	"$(printf '%s' "$out" | jq -r '(.error.message // .message) // empty' 2>/dev/null | grep -c 'PostgreSQL could not be reached')" 1
check "... with data.backend postgresql" \
	"$(printf '%s' "$out" | jq -r '(.error.data // .data).backend // empty' 2>/dev/null | head -n 1)" postgresql
"$here/pgctl.sh" start "$pgdir" "$pgport" >/dev/null 2>&1
# The nodes reconnect by themselves; the first request may fail once.
i=0
while ! berth $live info >/dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done

# 9. A job of a tool only the killed node has (its own --tools): the
# other nodes do not know the tool's onInterrupt, so they leave the job
# (before: they failed it "interrupted", though the tool says retry); a
# node started with the tool recovers it by that policy, at attempt 2.
mkdir -p "$dir/tools-d"
jq '.id = "only-d"' "$dir/tools/count-to.json" >"$dir/tools-d/only-d.json"
cp "$dir/tools/count-to.sh" "$dir/tools-d/"
start d --tools "$dir/tools-d"
i=0
while ! berth d info >/dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
jid=$(berth d --json submit only-d '{"to":20,"delayMs":200}' | jq -r .id)
poll_q d 100 "SELECT lease_owner FROM jobs WHERE id = '$jid' AND status = 2" >/dev/null
kill -9 "$pid_d"
# The lease (1.5 s) expires and the other nodes' ticks pass over it.
sleep 4
check "the other nodes leave the killed node's job of a tool they lack running" \
	"$(q "SELECT status || ' ' || attempt FROM jobs WHERE id = '$jid'")" "2 1"
dburl="$db?application_name=berth-e&password=pw-secret"
start e --tools "$dir/tools-d"
dburl=""
i=0
while ! berth e info >/dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
berth e wait "$jid" --timeout 60s >/dev/null 2>&1
check "a node with the tool ran it again and it completed" \
	"$(q "SELECT status || ' ' || attempt FROM jobs WHERE id = '$jid'")" "4 2"
check "server/info shows the password= of the URL's query as ***" \
	"$(berth e --json info | jq -r .database | sed -n 's|.*\(password=[^&]*\).*|\1|p')" "password=***"
check "no node's log shows that password" "$(cat "$dir"/*.log | grep -c pw-secret)" 0

# 10. A run's end at another attempt than its job's: the job, running,
# is moved to attempt 2 under the same lease, as an outage longer than
# the lease leaves it when the node claims its recovered job again while
# the end of its first run waits to be stored. That end is dropped
# (before: stored as attempt 2's result).
jid=$(berth $live --json submit count-to '{"to":10,"delayMs":200}' | jq -r .id)
owner=$(poll_q x 100 "SELECT CASE WHEN status = 2 THEN 'x' END FROM jobs WHERE id = '$jid'" >/dev/null;
	q "SELECT lease_owner FROM jobs WHERE id = '$jid'")
q "UPDATE jobs SET attempt = 2 WHERE id = '$jid' AND status = 2" >/dev/null
i=0
while ! grep -q "job $jid: its result is dropped" "$dir/$owner.log" 2>/dev/null && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i+1))
done
check "the first run's end did not complete the job at attempt 2" \
	"$(q "SELECT status || ' ' || attempt || ' ' || (output IS NULL) FROM jobs WHERE id = '$jid'")" "2 2 true"
check "... and was dropped as a conflict" "$(grep -c "job $jid: its result is dropped" "$dir/$owner.log")" 1
berth $live cancel "$jid" >/dev/null 2>&1

# 11. A job that waits for approval with a ttl, on a node killed then:
# the nodes still running expire it at its expiresAt (before: only the
# node that set it had armed its timer, and the job waited on until a
# restart or another ttl job rearmed a surviving node's).
start f
i=0
while ! berth f info >/dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
jid=$(berth f --json submit write-note '{"path":"/dev/null","text":"x"}' --ttl 2s | jq -r .id)
kill -9 "$pid_f"
berth $live wait "$jid" --until expired --timeout 30s >/dev/null 2>&1
check "a ttl of a killed node's job is kept by the other nodes" \
	"$(berth $live --json get "$jid" | jq -r .status)" expired

# 12. --cluster-workers 2 on two nodes: a tool of theirs with no limit
# of its own never runs more than twice at once over both (capped.sh's
# check, the tool's concurrency taken out); before, --workers was the
# only bound, each node's.
mkdir -p "$dir/tools-gh" "$dir/spread"
jq '.id = "spread" | del(.background.concurrency)' "$dir/tools/capped.json" >"$dir/tools-gh/spread.json"
cp "$dir/tools/capped.sh" "$dir/tools-gh/"
start g --tools "$dir/tools-gh" --cluster-workers 2
start h --tools "$dir/tools-gh" --cluster-workers 2
for n in g h; do
	i=0
	while ! berth $n info >/dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
done
ids=""
for i in 1 2 3 4 5 6 7 8; do
	n=g; [ $((i % 2)) = 0 ] && n=h
	ids="$ids $(berth $n --json submit spread "{\"dir\":\"$dir/spread\",\"ms\":300}" | jq -r .id)"
done
for id in $ids; do berth g wait "$id" --timeout 60s >/dev/null 2>&1; done
check "--cluster-workers 2 held over two nodes" \
	"$([ -f "$dir/spread/exceeded" ] && head -1 "$dir/spread/exceeded" || echo none)" none
check "all eight of its jobs completed" \
	"$(q "SELECT count(*) FROM jobs WHERE tool = 'spread' AND status = 4")" 8

[ $fail = 0 ] || { for n in a b c; do echo "--- $n.log"; tail -n 20 "$dir/$n.log"; done; }
exit $fail
