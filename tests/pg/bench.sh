#!/bin/sh
# bench.sh [COUNT]: end-to-end no-op jobs per second (submitted to
# completed, berth-bench --scenario e2e) with one, two and three berthd
# nodes on one PostgreSQL database, beside one node on SQLite, in one run.
# Each node (--workers ${WORKERS:-32}) gets its own berth-bench with 8 connections; the figure of a
# run is the sum of the nodes' figures. Needs a release build:
#   meson setup build-rel -Dbuildtype=release -Dtests=disabled
#   ninja -C build-rel && tests/pg/bench.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../../build-rel}
count=${1:-20000}
dir=$(mktemp -d /tmp/berth-pgbench-XXXXXX)
chmod 755 "$dir"
port=$(( 40000 + $$ % 10000 ))
url=$("$here/pgctl.sh" start "$dir/pg" "$port")
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	sleep 1
	"$here/pgctl.sh" stop "$dir/pg" "$port"
	rm -rf "$dir"
}
trap cleanup EXIT
# sh runs the EXIT trap on exit, not when a signal ends it: Ctrl-C, a
# closed terminal or a kill become exits, so that the nodes and the
# server (in a session of its own, which a Ctrl-C misses) stop then too.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# run NAME DB NODES: starts NODES berthd on DB, loads each, prints a row.
run() {
	name=$1 db=$2 nodes=$3
	pids=""
	i=0
	while [ $i -lt "$nodes" ]; do
		BERTH_NODE=n$i "$build/berthd/berthd" --db "$db" --socket "$dir/n$i.sock" \
			--workers "${WORKERS:-32}" --quiet >"$dir/n$i.log" 2>&1 &
		pids="$pids $!"
		i=$((i + 1))
	done
	sleep 2
	i=0
	benches=""
	while [ $i -lt "$nodes" ]; do
		"$build/bench/berth-bench" --socket "$dir/n$i.sock" --scenario e2e \
			--count "$count" --tsv --no-header >"$dir/out$i" &
		benches="$benches $!"
		i=$((i + 1))
	done
	for b in $benches; do wait "$b" || true; done
	# column 10 of berth-bench's row is jobs/s
	total=$(cat "$dir"/out* | awk -F'\t' 'NF >= 10 {s += $10} END {printf "%.0f", s}')
	printf '%s\t%s\t%s\n' "$name" "$nodes" "$total"
	cat "$dir"/out* >&2
	for p in $pids; do kill "$p"; done
	for p in $pids; do while kill -0 "$p" 2>/dev/null; do sleep 0.1; done; done
	pids=""
	rm -f "$dir"/out*
}

printf 'store\tnodes\tjobs/s\n'
run sqlite "$dir/berth.db" 1
for n in 1 2 3; do
	psql "$url" -qc "DROP DATABASE IF EXISTS b$n" -c "CREATE DATABASE b$n" >/dev/null 2>&1
	run postgres "$(echo "$url" | sed "s|/berth\$|/b$n|")" "$n"
done
