package report

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chromium finds Debian's chromium ($CASESTUDY_CHROMIUM overrides). Under
// CI=true a missing browser fails the test; elsewhere it skips with the reason.
func chromium(t *testing.T) string {
	path := os.Getenv("CASESTUDY_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no browser at %s (%v): install Debian's chromium (make deps)", path, err)
		}
		t.Skipf("no browser at %s: install Debian's chromium (make deps) or set CASESTUDY_CHROMIUM", path)
	}
	return path
}

// artifactsDir is $CASESTUDY_ARTIFACTS or build/artifacts of the repository.
func artifactsDir(t *testing.T) string {
	dir := os.Getenv("CASESTUDY_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "build", "artifacts")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// browser starts a headless chromium for the test, with a fresh profile and
// nothing that talks to the network.
func browser(t *testing.T) context.Context {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // tests run as root in containers
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000), // a laptop screen: the trials table must fit it
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	// Start the browser. The first Run's context must have no deadline (it
	// would stop the browser), so the wait is bounded here instead.
	started := make(chan error, 1)
	go func() {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("true"))
		started <- err
	}()
	select {
	case err := <-started:
		require.NoError(t, err, "starting %s", chromium(t))
	case <-time.After(90 * time.Second):
		cancel()
		t.Fatalf("%s did not start within 90s", chromium(t))
	}
	return ctx
}

// console collects the page's console messages until stop is called.
func console(ctx context.Context) (stop func() []chromedp.ConsoleMessage) {
	cctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var msgs []chromedp.ConsoleMessage
	done := make(chan struct{})
	seq := chromedp.Console(cctx)
	go func() {
		defer close(done)
		for m, err := range seq {
			if err != nil {
				return
			}
			mu.Lock()
			msgs = append(msgs, m)
			mu.Unlock()
		}
	}()
	return func() []chromedp.ConsoleMessage {
		time.Sleep(200 * time.Millisecond) // let the last events arrive
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return msgs
	}
}

func problems(msgs []chromedp.ConsoleMessage) []string {
	var out []string
	for _, m := range msgs {
		if m.Type == chromedp.ConsoleError || m.IsException() {
			out = append(out, m.String())
		}
	}
	return out
}

type rectBox struct{ W, H float64 }

// TestBrowserReport opens a generated report.html in headless chromium:
// every chart renders, a header click sorts the table, the filter works,
// the console stays clean; a screenshot goes to the artifacts.
func TestBrowserReport(t *testing.T) {
	ctx := browser(t)
	out := t.TempDir()
	_, err := Write(readFixture(t, "runs/bert-grid"), sampleFindings, out, []string{"html"})
	require.NoError(t, err)
	page, err := filepath.Abs(filepath.Join(out, "report.html"))
	require.NoError(t, err)

	stop := console(ctx)
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate("file://"+page), chromedp.WaitVisible(chromedp.CSS("#trials-table"))))

	boxes, err := chromedp.Run(tctx, chromedp.Evaluate[[]rectBox](`Array.from(document.querySelectorAll("#charts + .figs svg")).map(s => {
		const r = s.getBoundingClientRect(); return {W: r.width, H: r.height}; })`))
	require.NoError(t, err)
	require.Len(t, boxes, 5, "charts: the precision × micro_batch heatmap, every launch, breakdown, MFU, memory")
	for i, b := range boxes {
		assert.Greater(t, b.W, 200.0, "chart %d width", i)
		assert.Greater(t, b.H, 100.0, "chart %d height", i)
	}
	texts, err := chromedp.Run(tctx, chromedp.Evaluate[int](`Array.from(document.querySelectorAll("svg.chart text")).filter(e => e.getBBox().width > 0).length`))
	require.NoError(t, err)
	assert.Greater(t, texts, 40, "chart labels must render as text")
	cells, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#fig-grid-1 .mark.cell")).map(c => c.dataset.trial || "dropped")`))
	require.NoError(t, err)
	s := Build(readFixture(t, "runs/bert-grid"), nil)
	var want []string
	for _, tr := range s.Trials {
		want = append(want, tr.ID)
	}
	assert.ElementsMatch(t, append(want, "dropped"), cells, "the heatmap has a cell per trial and per dropped combination")

	// Sort by samples/s: first click descending, second ascending; rows
	// without a measurement stay last.
	col, err := chromedp.Run(tctx, chromedp.Evaluate[int](`Array.from(document.querySelectorAll("#trials-table thead th")).findIndex(th => th.textContent.trim() === "samples/s")`))
	require.NoError(t, err)
	require.GreaterOrEqual(t, col, 0)
	header := chromedp.CSS("#trials-table thead th:nth-child(" + itoa(col+1) + ")")
	column := `Array.from(document.querySelectorAll("#trials-table tbody tr")).map(r => r.cells[` + itoa(col) + `].getAttribute("data-v"))`
	for _, want := range []string{"descending", "ascending"} {
		require.NoError(t, chromedp.Do(tctx, chromedp.Click(header)))
		vals, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](column))
		require.NoError(t, err)
		require.Len(t, vals, 7)
		nums := parseNums(t, vals[:5])
		assert.Equal(t, []string{"", ""}, vals[5:], "unmeasured trials sort last")
		for i := 1; i < len(nums); i++ {
			if want == "descending" {
				assert.GreaterOrEqual(t, nums[i-1], nums[i], "%s order: %v", want, nums)
			} else {
				assert.LessOrEqual(t, nums[i-1], nums[i], "%s order: %v", want, nums)
			}
		}
		sortAttr, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.querySelectorAll("#trials-table thead th")[`+itoa(col)+`].getAttribute("aria-sort")`))
		require.NoError(t, err)
		assert.Equal(t, want, sortAttr)
	}

	require.NoError(t, chromedp.Do(tctx, chromedp.SendKeys(chromedp.CSS("#filter"), "bf16")))
	visible, err := chromedp.Run(tctx, chromedp.Evaluate[int](`Array.from(document.querySelectorAll("#trials-table tbody tr")).filter(r => !r.hidden).length`))
	require.NoError(t, err)
	assert.Equal(t, 3, visible, "three bf16 trials")
	shown, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("#shown")))
	require.NoError(t, err)
	assert.Equal(t, "3 of 7 trials", shown)
	// clear the filter again for the screenshot
	_, err = chromedp.Run(tctx, chromedp.Evaluate[bool](`(() => { const f = document.getElementById("filter"); f.value = ""; f.dispatchEvent(new Event("input")); window.scrollTo(0, 0); return true; })()`))
	require.NoError(t, err)

	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.Greater(t, len(png), 10_000)
	art := artifactsDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(art, "report.png"), png, 0o644))
	figs, err := chromedp.Run(tctx, chromedp.Screenshot(chromedp.CSS(".figs")))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(art, "report-charts.png"), figs, 0o644))
	html, err := os.ReadFile(page)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(art, "report.html"), html, 0o644))
	t.Logf("screenshot: %s", filepath.Join(art, "report.png"))

	// The console must be clean; a probe error proves the listener works.
	_, err = chromedp.Run(tctx, chromedp.Evaluate[bool](`console.error("casestudy-probe"), true`))
	require.NoError(t, err)
	msgs := stop()
	probs := problems(msgs)
	require.NotEmpty(t, probs, "the console listener saw nothing: it is broken")
	assert.Equal(t, []string{"error: casestudy-probe"}, probs, "console errors or exceptions on the page")
}

// TestBrowserFailedOnly: a run where nothing finished renders without errors
// and says so.
func TestBrowserFailedOnly(t *testing.T) {
	ctx := browser(t)
	out := t.TempDir()
	_, err := Write(readFixture(t, "runs/all-failed"), nil, out, []string{"html"})
	require.NoError(t, err)
	page, _ := filepath.Abs(filepath.Join(out, "report.html"))
	stop := console(ctx)
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate("file://"+page), chromedp.WaitVisible(chromedp.CSS("#headline"))))
	head, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("#headline .big")))
	require.NoError(t, err)
	assert.Equal(t, "No trial finished", head)
	shown, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("#shown")))
	require.NoError(t, err)
	assert.Equal(t, "3 of 3 trials", shown)
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(artifactsDir(t), "report-all-failed.png"), png, 0o644))
	assert.Empty(t, problems(stop()))
}

func itoa(i int) string { return strconv.Itoa(i) }

func parseNums(t *testing.T, vals []string) []float64 {
	out := make([]float64, len(vals))
	for i, v := range vals {
		f, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err, "data-v %q", v)
		out[i] = f
	}
	return out
}

// TestBrowserHistory: the history page's charts render and the console stays clean.
func TestBrowserHistory(t *testing.T) {
	ctx := browser(t)
	h, err := LoadHistory(filepath.Join("testdata", "history", "bert-grid"))
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, WriteHistory(&buf, h, "html"))
	page := filepath.Join(t.TempDir(), "history.html")
	require.NoError(t, os.WriteFile(page, buf.Bytes(), 0o644))
	stop := console(ctx)
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate("file://"+page), chromedp.WaitVisible(chromedp.CSS("table"))))
	boxes, err := chromedp.Run(tctx, chromedp.Evaluate[[]rectBox](`Array.from(document.querySelectorAll("svg")).map(s => {
		const r = s.getBoundingClientRect(); return {W: r.width, H: r.height}; })`))
	require.NoError(t, err)
	require.Len(t, boxes, 2)
	for _, b := range boxes {
		assert.Greater(t, b.W, 200.0)
		assert.Greater(t, b.H, 100.0)
	}
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(artifactsDir(t), "history.png"), png, 0o644))
	assert.Empty(t, problems(stop()))
}
