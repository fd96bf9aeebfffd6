package report

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openPage navigates to a report written for fixture (or to page when
// fixture is "") and waits for it.
func openPage(t *testing.T, ctx context.Context, fixture, page string) context.Context {
	t.Helper()
	if fixture != "" {
		out := t.TempDir()
		_, err := Write(readFixture(t, fixture), nil, out, []string{"html"})
		require.NoError(t, err)
		page = filepath.Join(out, "report.html")
	}
	abs, err := filepath.Abs(page)
	require.NoError(t, err)
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate("file://"+abs), chromedp.WaitVisible(chromedp.CSS("main"))))
	return tctx
}

type knobMarks struct {
	Points []string `json:"points"`
	Misses []string `json:"misses"`
}

type placed struct {
	Value string  `json:"value"`
	CX    float64 `json:"cx"`
	TickX float64 `json:"tickx"` // centre of the axis label with the same text, -1 if none
}

// TestBrowserSweepCharts: the per-knob charts of a one-at-a-time sweep hold
// exactly the baseline and the trials that change that knob alone, at their
// true positions (micro_batch on a log2 axis: 4 at the tick "4", equal
// spacing per doubling); the greedy chart draws its path.
func TestBrowserSweepCharts(t *testing.T) {
	ctx := browser(t)
	s := Build(readFixture(t, "runs/gpt-oat"), nil)
	tctx := openPage(t, ctx, "runs/gpt-oat", "")
	got, err := chromedp.Run(tctx, chromedp.Evaluate[map[string]knobMarks](`(() => {
		const out = {};
		document.querySelectorAll("figure[id^='fig-knob-']").forEach(f => {
			const ids = sel => Array.from(f.querySelectorAll(sel)).map(e => e.dataset.trial);
			out[f.id.slice(9)] = {points: ids(".mark.point"), misses: ids(".mark.miss")};
		});
		return out; })()`))
	require.NoError(t, err)
	want := map[string]knobMarks{}
	for _, k := range s.SweptKnobs {
		var w knobMarks
		for _, tr := range s.Trials {
			if !tr.Baseline && !slices.Equal(tr.Changed, []string{k}) {
				continue
			}
			if tr.OK() {
				w.Points = append(w.Points, tr.ID)
			} else {
				w.Misses = append(w.Misses, tr.ID)
			}
		}
		want[k] = w
	}
	require.Equal(t, []string{"precision", "micro_batch", "graphs"}, s.SweptKnobs)
	require.Len(t, got, 3, "one chart per swept knob")
	for k, w := range want {
		assert.ElementsMatch(t, w.Points, got[k].Points, "points of the %s chart: the baseline and the trials that change %s only", k, k)
		assert.ElementsMatch(t, w.Misses, got[k].Misses, "trials of the %s chart that did not finish", k)
	}
	assert.Len(t, got["micro_batch"].Points, 4, "baseline 8, and 4, 16, 32")
	assert.Len(t, got["micro_batch"].Misses, 1, "64 ran out of memory")

	pos, err := chromedp.Run(tctx, chromedp.Evaluate[[]placed](`(() => {
		const svg = document.querySelector("#fig-knob-micro_batch svg");
		const ticks = Array.from(svg.querySelectorAll("text")).filter(e => !e.closest(".overlay"));
		const centre = r => (r.left + r.right) / 2;
		return Array.from(svg.querySelectorAll(".mark.point, .mark.miss")).map(m => {
			const v = m.dataset.x, tick = ticks.find(e => e.textContent.trim() === v);
			return {value: v, cx: centre(m.getBoundingClientRect()), tickx: tick ? centre(tick.getBoundingClientRect()) : -1};
		}); })()`))
	require.NoError(t, err)
	require.Len(t, pos, 5)
	slices.SortFunc(pos, func(a, b placed) int { return int(atof(a.Value) - atof(b.Value)) })
	step := (pos[len(pos)-1].CX - pos[0].CX) / math.Log2(atof(pos[len(pos)-1].Value)/atof(pos[0].Value))
	for _, p := range pos {
		assert.InDelta(t, p.TickX, p.CX, 1.5, "micro_batch=%s sits on its tick", p.Value)
		assert.InDelta(t, pos[0].CX+step*math.Log2(atof(p.Value)/atof(pos[0].Value)), p.CX, 0.75, "micro_batch=%s on a log2 axis", p.Value)
	}

	gctx := openPage(t, ctx, "runs/gpt-greedy", "")
	path, err := chromedp.Run(gctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#fig-greedy .mark.point")).map(e => e.dataset.label)`))
	require.NoError(t, err)
	assert.Equal(t, []string{"baseline", "baseline", "micro_batch=16", "micro_batch=32", "micro_batch=32", "micro_batch=32, graphs=true"}, path,
		"start; round 1 (micro_batch 8, 16, 32); round 2 from micro_batch=32 (graphs false, true)")
	segs, err := chromedp.Run(gctx, chromedp.Evaluate[int](`document.querySelectorAll("#fig-greedy .mark.segment.path").length`))
	require.NoError(t, err)
	assert.Equal(t, 2, segs, "the path: start → micro_batch=32 → graphs=true")
}

func atof(s string) float64 {
	var f float64
	for _, c := range s {
		f = 10*f + float64(c-'0')
	}
	return f
}

type overlap struct {
	Bad     []string `json:"bad"`
	Legends int      `json:"legends"`
	Inside  int      `json:"inside"`
	Marks   int      `json:"marks"`
}

// legendOverlaps finds every legend box that intersects a data mark or a
// value label, in the browser's own layout (its fonts, its geometry).
const legendOverlaps = `(() => {
	const out = {bad: [], legends: 0, inside: 0, marks: 0};
	document.querySelectorAll("svg.chart").forEach(svg => {
		const marks = Array.from(svg.querySelectorAll(".mark, .label"));
		out.marks += marks.length;
		svg.querySelectorAll("g.legend").forEach(l => {
			out.legends++;
			if (!l.classList.contains("legend-below")) out.inside++;
			const a = l.getBoundingClientRect();
			marks.forEach(m => {
				const b = m.getBoundingClientRect();
				if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom)
					out.bad.push(svg.getAttribute("aria-label") + ": " + (m.dataset.label || m.textContent) + " (" + m.getAttribute("class") + ")");
			});
		});
	});
	return out; })()`

// TestBrowserLegends: no legend box intersects a data mark or label, on
// every chart of every fixture and of the history page; some legends sit
// inside the data area (placed in a free corner), so the check has teeth.
func TestBrowserLegends(t *testing.T) {
	ctx := browser(t)
	inside := 0
	for _, fx := range []string{"runs/gpt-oat", "runs/bert-grid", "runs/gpt-greedy", "runs/gpt-pipeline", "history"} {
		t.Run(filepath.Base(fx), func(t *testing.T) {
			var tctx context.Context
			if fx == "history" {
				h, err := LoadHistory(filepath.Join("testdata", "history", "bert-grid"))
				require.NoError(t, err)
				f, err := os.Create(filepath.Join(t.TempDir(), "history.html"))
				require.NoError(t, err)
				require.NoError(t, WriteHistory(f, h, "html"))
				require.NoError(t, f.Close())
				tctx = openPage(t, ctx, "", f.Name())
			} else {
				tctx = openPage(t, ctx, fx, "")
			}
			o, err := chromedp.Run(tctx, chromedp.Evaluate[overlap](legendOverlaps))
			require.NoError(t, err)
			assert.Greater(t, o.Legends, 0, "legends drawn")
			assert.Greater(t, o.Marks, 10, "marks drawn")
			assert.Empty(t, o.Bad, "legends over data")
			inside += o.Inside
		})
	}
	assert.Greater(t, inside, 2, "legends placed inside the data area, in free corners")
}

type tableFit struct {
	Scroll, Client, Page, Inner float64
	Shown, All                  int
}

// TestBrowserTableFits: at 1400 px the trials table shows its default
// columns without a horizontal scroll, and "all columns" shows the rest.
func TestBrowserTableFits(t *testing.T) {
	ctx := browser(t)
	for _, fx := range []string{"runs/gpt-oat", "runs/bert-grid", "runs/gpt-pipeline"} {
		t.Run(filepath.Base(fx), func(t *testing.T) {
			tctx := openPage(t, ctx, fx, "")
			const measure = `(() => {
				const wrap = document.getElementById("trials-table").closest(".tablewrap");
				const heads = Array.from(document.querySelectorAll("#trials-table thead th"));
				return {Scroll: wrap.scrollWidth, Client: wrap.clientWidth, Page: document.documentElement.scrollWidth,
					Inner: window.innerWidth, Shown: heads.filter(h => h.offsetParent !== null).length, All: heads.length}; })()`
			f, err := chromedp.Run(tctx, chromedp.Evaluate[tableFit](measure))
			require.NoError(t, err)
			assert.Equal(t, 1400.0, f.Inner, "window width")
			assert.LessOrEqual(t, f.Scroll, f.Client, "the trials table scrolls sideways at 1400 px")
			assert.LessOrEqual(t, f.Page, f.Inner, "the page scrolls sideways at 1400 px")
			assert.Less(t, f.Shown, f.All, "a compact default view")
			require.NoError(t, chromedp.Do(tctx, chromedp.Click(chromedp.CSS("#allcols"))))
			f2, err := chromedp.Run(tctx, chromedp.Evaluate[tableFit](measure))
			require.NoError(t, err)
			assert.Equal(t, f2.All, f2.Shown, "all columns on demand")
		})
	}
}
