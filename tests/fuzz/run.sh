#!/bin/sh
# run.sh TARGET EXE SEEDS REGRESSIONS WORKDIR: runs a libFuzzer target for
# $FUZZ_SECONDS (default 25) seconds. WORKDIR/TARGET collects the corpus it
# grows (never the seed corpus in the repository); a crash or a leak leaves
# its input in WORKDIR/TARGET-artifacts/ and fails the test (exit 1, not
# libFuzzer's default 77, which meson would count as a skip): copy it into
# REGRESSIONS so the suite replays it from then on.
set -eu
target=$1 exe=$2 seeds=$3 regressions=$4 work=$5
mkdir -p "$work/$target" "$work/$target-artifacts"
set -- -max_total_time="${FUZZ_SECONDS:-25}" -timeout=20 -rss_limit_mb=2048 \
	-max_len=65536 -print_final_stats=1 -error_exitcode=1 \
	-artifact_prefix="$work/$target-artifacts/" "$work/$target" "$seeds"
[ -d "$regressions" ] && set -- "$@" "$regressions"
exec "$exe" "$@"
