#!/usr/bin/env bash
# Render a run's report.html and take a 1400 px screenshot of it (headless
# Debian chromium through chromedp, as the browser tests do): the README
# picture is made with this from a current GPU run of a headline study.
#
#   scripts/report-screenshot.sh RUN_DIR [OUT.png]
#
# OUT defaults to build/artifacts/report-screenshot.png. The run directory is
# only read: the report is rendered into a temporary folder.
set -euo pipefail
if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 RUN_DIR [OUT.png]" >&2
  exit 2
fi
run=$(cd "$1" && pwd)
out=${2:-build/artifacts/report-screenshot.png}
[[ -f "$run/manifest.json" ]] || { echo "$0: $run is not a run directory (no manifest.json)" >&2; exit 2; }
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
cd "$(dirname "$0")/.."
CASESTUDY_SCREENSHOT_RUN="$run" CASESTUDY_SCREENSHOT_OUT="$out" \
  go test ./report -run '^TestBrowserScreenshotRun$' -count=1 -v | grep -E 'screenshot of|FAIL|ok ' || true
[[ -s "$out" ]] || { echo "$0: no screenshot written" >&2; exit 1; }
echo "$out"
