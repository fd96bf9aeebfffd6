#!/usr/bin/env bash
# The readers' memory on a huge run (issue 38, audit N3/L-5): a synthetic
# run of TRIALS trials (default 20,000, the plan limit) that sweep one knob,
# the checklist's worst case, then `check` and `report` on it with their peak
# RSS (GNU time). Fails when either exceeds LIMIT_MB (default 2048) or fails.
# The numbers are not a measurement of any machine's training; they measure
# the tools. Record them in docs/perf.md with the commit.
#
#   scripts/bench-huge-run.sh [TRIALS]
set -euo pipefail
cd "$(dirname "$0")/.."
trials=${1:-20000}
limit_mb=${LIMIT_MB:-2048}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/casestudy" ./cmd/casestudy
go run ./bench/synthrun -out "$work/run" -trials "$trials"
ls -l "$work/run/trials.jsonl" | awk '{printf "trials.jsonl: %.1f MB\n", $5/1e6}'
status=0
for cmd in status check report; do
	args=("$cmd" "$work/run")
	if [ "$cmd" = report ]; then args+=(--out "$work/report"); fi
	set +e
	/usr/bin/time -f '%M %e' -o "$work/time" "$work/casestudy" "${args[@]}" >"$work/$cmd.out" 2>&1
	rc=$?
	set -e
	read -r kb secs <"$work/time"
	mb=$((kb / 1024))
	echo "$cmd: exit $rc, peak RSS ${mb} MB, ${secs} s"
	if [ "$rc" -gt 1 ] || [ "$mb" -gt "$limit_mb" ]; then
		echo "  FAIL: over ${limit_mb} MB or exit $rc; last lines:" >&2
		tail -5 "$work/$cmd.out" >&2
		status=1
	fi
done
exit $status
