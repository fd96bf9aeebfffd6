package report

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fitsJS is the page's widest overflow past the 1400 px window: 0 when
// nothing is cut (the page never scrolls sideways).
const fitsJS = `document.documentElement.scrollWidth - window.innerWidth`

// rightEdgeJS is how far the header cell whose text is name reaches past its
// table's visible box (> 0: cut off, to be scrolled to).
func rightEdgeJS(table, name string) string {
	return `(() => { const th = Array.from(document.querySelectorAll("` + table + ` thead th")).find(h => h.textContent.trim() === "` + name + `");
		if (!th) return 9999; const wrap = th.closest(".tablewrap") || document.body;
		return th.getBoundingClientRect().right - Math.min(wrap.getBoundingClientRect().right, window.innerWidth); })()`
}

// TestBrowserH100Report opens the report of the real H100 BERT run at
// 1400 px: the "What was measured" block, the every-launch chart and, once
// opened, a launch's three charts render; no column that answers the
// question is cut, the page does not scroll sideways, the console is clean.
func TestBrowserH100Report(t *testing.T) {
	ctx := browser(t)
	out := t.TempDir()
	_, err := Write(readFixture(t, "h100/bert"), nil, out, []string{"html"})
	require.NoError(t, err)
	page, err := filepath.Abs(filepath.Join(out, "report.html"))
	require.NoError(t, err)
	stop := console(ctx)
	tctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate("file://"+page), chromedp.WaitVisible(chromedp.CSS("#measured"))))

	measured, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("#measured .subtitle")))
	require.NoError(t, err)
	assert.Contains(t, measured, "bert large (336.2M)")
	caveat, err := chromedp.Run(tctx, chromedp.Evaluate[float64](`document.querySelector("#measured .caveats").getBoundingClientRect().height`))
	require.NoError(t, err)
	assert.Greater(t, caveat, 20.0, "the recipe caveats render")

	strip, err := chromedp.Run(tctx, chromedp.Evaluate[rectBox](`(() => { const r = document.querySelector("#fig-launches svg").getBoundingClientRect(); return {W: r.width, H: r.height}; })()`))
	require.NoError(t, err)
	assert.Greater(t, strip.W, 400.0)
	assert.Greater(t, strip.H, 150.0)
	dots, err := chromedp.Run(tctx, chromedp.Evaluate[int](`document.querySelectorAll("#fig-launches .mark.launch").length`))
	require.NoError(t, err)
	assert.Equal(t, 40, dots, "one dot per launch")

	// launches start closed; opened, each draws its three charts
	open, err := chromedp.Run(tctx, chromedp.Evaluate[int](`document.querySelectorAll("details.launch[open], details.trial-launches[open]").length`))
	require.NoError(t, err)
	assert.Zero(t, open)
	figs, err := chromedp.Run(tctx, chromedp.Evaluate[[]rectBox](`(() => {
		const tr = document.querySelector("details.trial-launches"); tr.open = true;
		const l = tr.querySelector("details.launch"); l.open = true;
		return Array.from(l.querySelectorAll("svg")).map(s => { const r = s.getBoundingClientRect(); return {W: r.width, H: r.height}; }); })()`))
	require.NoError(t, err)
	require.Len(t, figs, 3, "step time, SM clock, power")
	for _, f := range figs {
		assert.Greater(t, f.W, 250.0)
		assert.Greater(t, f.H, 80.0)
	}
	labels, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](`Array.from(document.querySelector("details.launch[open]").querySelectorAll("svg")).map(s => s.getAttribute("aria-label"))`))
	require.NoError(t, err)
	assert.Contains(t, labels[1], "SM clock")
	assert.Contains(t, labels[2], "power")

	for _, col := range []string{"memory held", "vs baseline", "verdict", "samples/s"} {
		over, err := chromedp.Run(tctx, chromedp.Evaluate[float64](rightEdgeJS("#trials-table", col)))
		require.NoError(t, err)
		assert.LessOrEqual(t, over, 0.5, "the %q column is cut at 1400 px", col)
	}
	wide, err := chromedp.Run(tctx, chromedp.Evaluate[float64](fitsJS))
	require.NoError(t, err)
	assert.LessOrEqual(t, wide, 0.0, "the page scrolls sideways at 1400 px")

	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(90))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(artifactsDir(t), "report-h100-bert.png"), png, 0o644))
	assert.Empty(t, problems(stop()))
}

// TestBrowserHistoryNights: twelve nights, one with a change point: at
// 1400 px the answer columns (last vs first, change point) are visible
// without scrolling, the change point is marked in the chart.
func TestBrowserHistoryNights(t *testing.T) {
	ctx := browser(t)
	h, err := LoadHistory(nightsDir(t, 12, 8, 0.85))
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, WriteHistory(&buf, h, "html"))
	page := filepath.Join(t.TempDir(), "history.html")
	require.NoError(t, os.WriteFile(page, buf.Bytes(), 0o644))
	stop := console(ctx)
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate("file://"+page), chromedp.WaitVisible(chromedp.CSS("table"))))
	for _, col := range []string{"last vs first", "change point"} {
		over, err := chromedp.Run(tctx, chromedp.Evaluate[float64](rightEdgeJS("table", col)))
		require.NoError(t, err)
		assert.LessOrEqual(t, over, 0.5, "the %q column is cut at 1400 px", col)
	}
	wide, err := chromedp.Run(tctx, chromedp.Evaluate[float64](fitsJS))
	require.NoError(t, err)
	assert.LessOrEqual(t, wide, 0.0, "the page scrolls sideways at 1400 px")
	rings, err := chromedp.Run(tctx, chromedp.Evaluate[int](`document.querySelectorAll("svg .mark.change").length`))
	require.NoError(t, err)
	assert.Equal(t, 2, rings, "the change point, in the absolute and the relative chart")
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(90))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(artifactsDir(t), "history-nights.png"), png, 0o644))
	assert.Empty(t, problems(stop()))
}

// TestBrowserScreenshotRun renders the report of the run directory named by
// $CASESTUDY_SCREENSHOT_RUN (the README picture: scripts/report-screenshot.sh)
// and writes a 1400 × 1500 px screenshot of its top to $CASESTUDY_SCREENSHOT_OUT
// (default build/artifacts/report-screenshot.png). Skipped without the
// variable.
func TestBrowserScreenshotRun(t *testing.T) {
	dir := os.Getenv("CASESTUDY_SCREENSHOT_RUN")
	if dir == "" {
		t.Skip("set CASESTUDY_SCREENSHOT_RUN to a run directory (scripts/report-screenshot.sh)")
	}
	ctx := browser(t)
	out := t.TempDir()
	_, err := Write(mustRead(t, dir), nil, out, []string{"html"})
	require.NoError(t, err)
	tctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate("file://"+filepath.Join(out, "report.html")), chromedp.WaitVisible(chromedp.CSS("#trials-table"))))
	require.NoError(t, chromedp.Do(tctx, chromedp.EmulateViewport(1400, 1500)))
	png, err := chromedp.Run(tctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	dst := os.Getenv("CASESTUDY_SCREENSHOT_OUT")
	if dst == "" {
		dst = filepath.Join(artifactsDir(t), "report-screenshot.png")
	}
	require.NoError(t, os.WriteFile(dst, png, 0o644))
	t.Logf("screenshot of %s: %s", dir, dst)
}
