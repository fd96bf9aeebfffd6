package checklist

import (
	"fmt"
	"slices"
	"strings"

	"github.com/casestudy/casestudy/profile"
	"github.com/casestudy/casestudy/stats"
)

// Rules that read the kernel profiles (knob profile): where a step's time
// went on the device, not only how long it took.

const noProfiles = "no trial was profiled (set profile: 3 in the study's baseline, or casestudy run --profile 3)"

var profileRules = []*Rule{
	{
		ID: "profile-launch-bound", Title: "The GPU waits for the host (launch-bound steps)", Chapter: 27, Severity: Warning,
		Rationale: "The profile's GPU busy time is the union of every kernel's interval; the rest of the measured step " +
			"the GPU sat idle, waiting for the host to launch the next kernel. A large idle share means the step is " +
			"launch-bound: many short kernels issued one by one from the CPU. Source: the kernel profile of each " +
			"trial (rank 0, mean over launches); BERT-large at 128 tokens in eager on the H200 idles about half of its " +
			"step (50 ms eager against 25.5 ms replayed as a CUDA Graph). Where the run measured the graphed twin " +
			"of an eager trial, its verdict decides: graphs: true is recommended only when it was decided faster by " +
			"more than the study's compare.threshold, and the finding cites the verdict either way.",
		Needs: []string{"profile.idle_share (GPU idle against the measured step)", "profile.busy_ms", "profile.kernels_per_step",
			"knob graphs", "knob micro_batch"},
		Thresholds: []Threshold{
			{Name: "max_idle_share", Default: 0.20, Unit: "fraction",
				Doc: "GPU idle share of the step above which it is launch-bound (well-fed steps idle a few percent; BERT-128 eager ~50%)"},
		},
		check: checkLaunchBound,
	},
	{
		ID: "profile-normalisation", Title: "Normalisation kernels dominate the step", Chapter: 29, Severity: Warning,
		Rationale: "Batch norm and layer norm are memory-bound: each reads and writes the activations once or twice " +
			"for a few FLOPs. When they take a large share of the kernel time, the layout, the precision and fusion " +
			"decide the step: channels_last for convolutions, fp16 where bf16 runs PyTorch's own batch norm (PyTorch " +
			"sends fp16, not bf16, to cuDNN's; the engine's own kernels run both), fused normalisation kernels. fp16 is " +
			"recommended only when the run measured the fp16 twin faster by more than the study's compare.threshold; " +
			"the finding cites that verdict, whichever it is. Source: the kernel " +
			"profile's categories batchnorm and layernorm and its top kernels; ResNet-50 bf16 on the H200 spends 45% " +
			"of its kernel time in batch norm.",
		Needs: []string{"profile.categories (batchnorm, layernorm)", "profile.top", "knob precision", "knob channels_last"},
		Thresholds: []Threshold{
			{Name: "max_share", Default: 0.30, Unit: "fraction",
				Doc: "share of the kernel time in normalisation above which it dominates (ResNet-50 bf16, H200: 45%)"},
		},
		check: checkNormalisation,
	},
	{
		ID: "profile-elementwise", Title: "Elementwise kernels dominate the step", Chapter: 29, Severity: Warning,
		Rationale: "Elementwise kernels, reductions and copies (activations, residual adds, casts, layout changes) " +
			"move bytes and do little math; a step where they take a large share of the kernel time is bound by " +
			"memory traffic that fusion removes (fused optimizers, fused activations, torch.compile-style kernels, " +
			"channels_last to drop layout copies). Source: the kernel profile's categories elementwise, reduction " +
			"and copy/memset.",
		Needs: []string{"profile.categories (elementwise, reduction, copy/memset)", "profile.top", "knob channels_last"},
		Thresholds: []Threshold{
			{Name: "max_share", Default: 0.35, Unit: "fraction",
				Doc: "share of the kernel time in elementwise kernels, reductions and copies above which they dominate"},
		},
		check: checkElementwise,
	},
	{
		ID: "profile-exposed-comm", Title: "Communication kernels not hidden behind compute", Chapter: 15, Severity: Warning,
		Rationale: "The profile measures each collective kernel's overlap with kernels on other streams: what does not " +
			"overlap is exposed, and the step waits for it. Source: the kernel profile's communication time and " +
			"its overlap with compute (comm_ms, comm_overlap_ms, exposed_comm_ms), rank 0.",
		Needs: []string{"profile.comm_ms", "profile.comm_overlap_ms", "profile.exposed_comm_ms", "knob ddp.overlap", "knob ddp.bucket_mb"},
		Thresholds: []Threshold{
			{Name: "max_exposed_share", Default: 0.10, Unit: "fraction",
				Doc: "exposed communication as a share of the step above which it is worth hiding"},
		},
		check: checkProfileExposedComm,
	},
}

// profiled is an ok trial with its profile (rank 0, mean over launches).
type profiled struct {
	t *trial
	p *profile.Summary
}

// profiles returns the run's ok trials that have a profile.
func (v *runView) profiles() []profiled {
	var out []profiled
	for _, t := range v.ok {
		if p := profile.Mean(t.rec.Profiles(0)); p != nil {
			out = append(out, profiled{t, p})
		}
	}
	return out
}

// profileStep is the step a profile's idle share is judged against.
func profileStep(p *profile.Summary) float64 {
	if p.IdleOf == "measured" && p.StepMS > 0 {
		return p.StepMS
	}
	return p.ProfiledStepMS
}

// topKernel is the largest listed kernel of one of the categories ("" none).
func topKernel(p *profile.Summary, cats ...string) string {
	for _, k := range p.Top {
		for _, c := range cats {
			if k.Category == c {
				return k.Name
			}
		}
	}
	return ""
}

func checkLaunchBound(c *evalContext) verdict {
	all := c.run.profiles()
	if len(all) == 0 {
		return na(noProfiles)
	}
	var gpu []profiled
	for _, pt := range all {
		if pt.p.Device == "cuda" {
			gpu = append(gpu, pt)
		}
	}
	if len(gpu) == 0 {
		return na("the profiles are of CPU operators: GPU idle time needs a CUDA device")
	}
	limitShare := c.t("max_idle_share")
	var bad []profiled
	worst := gpu[0]
	for _, pt := range gpu {
		if pt.p.IdleShare > worst.p.IdleShare {
			worst = pt
		}
		if pt.p.IdleShare > limitShare {
			bad = append(bad, pt)
		}
	}
	if len(bad) == 0 {
		return pass("the GPU idled at most %s of the step (trial %s), below %s", pct(worst.p.IdleShare), worst.t.ID, pct(limitShare))
	}
	isBad := profiledSet(bad)
	var ev, twins []string
	eager, untried := false, false
	var graphed []string // the measured verdicts of the eager trials' graphed twins
	win := ""
	for _, pt := range bad {
		ev = append(ev, fmt.Sprintf("%s: GPU idle %s of a %s step (busy %s), %.0f kernels per step",
			pt.t.label(), pct(pt.p.IdleShare), ms(profileStep(pt.p)), ms(pt.p.BusyMS), pt.p.KernelsPerStep))
		if pt.t.knob("graphs") == "true" {
			continue
		}
		eager = true
		// The graphed twin, when measured: its verdict against the eager
		// trial (δ, the study's threshold) decides, not the idle share.
		tw := c.run.twin(pt.t, "graphs", "true")
		if tw == nil || !slices.Contains(c.run.ok, tw) {
			untried = true
			continue
		}
		line := tw.label() + ":"
		if tp := profile.Mean(tw.rec.Profiles(0)); tp != nil && !isBad[tw] { // a bad twin has its own line
			line += fmt.Sprintf(" GPU idle %s with graphs (step %s);", pct(tp.IdleShare), ms(profileStep(tp)))
		}
		cmp := c.run.compare(tw, pt.t)
		line += fmt.Sprintf(" against %s: %s (%s, %d vs %d launches)", pt.t.ID, cmp.Text(), cmp.PText(), cmp.NTrial, cmp.NBase)
		ev = append(ev, line)
		graphed = append(graphed, fmt.Sprintf("trial %s against %s: %s", tw.ID, pt.t.ID, cmp.Text()))
		twins = append(twins, tw.ID)
		if cmp.Winner() && win == "" {
			win = fmt.Sprintf("use graphs: true (trial %s: %s against eager %s)", tw.ID, cmp.Text(), pt.t.ID)
		}
	}
	var recs []string
	switch {
	case win != "":
		recs = append(recs, win)
	case len(graphed) > 0:
		recs = append(recs, "graphs: true was measured and not decided faster by more than "+stats.PercentText(c.run.level.Threshold)+
			" ("+strings.Join(limit(graphed, 3), "; ")+"): no recommendation to use it; measure again with more launches if an effect is expected")
	}
	if untried && win == "" {
		recs = append(recs, "sweep graphs: [false, true] to measure CUDA Graphs (one launch for the step)")
	}
	if eager {
		recs = append(recs, "raise micro_batch so that each launch carries more work")
	} else {
		recs = append(recs, "raise micro_batch so that each launch carries more work; the steps are graphed already: look for host synchronisation inside the step")
	}
	rec := strings.Join(recs, "; ")
	return verdict{
		Status: Finding,
		Message: fmt.Sprintf("the GPU idled %s of trial %s's %s step waiting for the host (launch-bound; %d trial(s) above %s)",
			pct(bad[0].p.IdleShare), bad[0].t.ID, ms(profileStep(bad[0].p)), len(bad), pct(limitShare)),
		Evidence:       limit(ev, 8),
		Trials:         append(profiledIDs(bad), twins...),
		Recommendation: rec,
	}
}

func checkNormalisation(c *evalContext) verdict {
	all := c.run.profiles()
	if len(all) == 0 {
		return na(noProfiles)
	}
	limitShare := c.t("max_share")
	share := func(p *profile.Summary) float64 { return p.Share(profile.BatchNorm) + p.Share(profile.LayerNorm) }
	var bad []profiled
	worst := all[0]
	for _, pt := range all {
		if share(pt.p) > share(worst.p) {
			worst = pt
		}
		if share(pt.p) > limitShare {
			bad = append(bad, pt)
		}
	}
	if len(bad) == 0 {
		return pass("normalisation took at most %s of the kernel time (trial %s), below %s", pct(share(worst.p)), worst.t.ID, pct(limitShare))
	}
	var ev []string
	var recs []string
	addRec := func(r string) {
		for _, x := range recs {
			if x == r {
				return
			}
		}
		recs = append(recs, r)
	}
	var verdicts, twins []string // the fp16 twins' measured verdicts, after the profiles
	isBad := profiledSet(bad)
	for _, pt := range bad {
		p := pt.p
		line := fmt.Sprintf("%s: batch norm %s, layer norm %s per step, %s of the kernel time", pt.t.label(),
			ms(p.MS(profile.BatchNorm)), ms(p.MS(profile.LayerNorm)), pct(share(p)))
		if k := topKernel(p, profile.BatchNorm, profile.LayerNorm); k != "" {
			line += "; largest: " + shortKernel(k)
			if who := kernelSource(k); who != "" {
				line += " (" + who + ")"
			}
		}
		ev = append(ev, line)
		bn := p.MS(profile.BatchNorm) >= p.MS(profile.LayerNorm)
		if bn && pt.t.knob("channels_last") == "false" {
			addRec("channels_last: true (NHWC batch norm and convolutions, no layout copies)")
		}
		bnKernel := topKernel(p, profile.BatchNorm)
		if bn && pt.t.knob("precision") == "bf16" && !strings.Contains(strings.ToLower(bnKernel), "cudnn") {
			// fp16 may run another batch norm (PyTorch's cuDNN path takes
			// fp16, not bf16): only the run's own fp16 twin says whether
			// that is faster, by its verdict against δ.
			tw := c.run.twin(pt.t, "precision", "fp16")
			switch {
			case tw != nil && slices.Contains(c.run.ok, tw):
				cmp := c.run.compare(tw, pt.t)
				twK := ""
				if tp := profile.Mean(tw.rec.Profiles(0)); tp != nil {
					twK = topKernel(tp, profile.BatchNorm)
					if !isBad[tw] { // its own line is there already
						line := fmt.Sprintf("%s: batch norm %s per step (%s of the kernel time); largest: %s", tw.label(),
							ms(tp.MS(profile.BatchNorm)), pct(tp.Share(profile.BatchNorm)), shortKernel(twK))
						if who := kernelSource(twK); who != "" {
							line += " (" + who + ")"
						}
						ev = append(ev, line)
					}
				}
				vline := fmt.Sprintf("precision: fp16 against bf16 (trials %s, %s): %s (%s, %d vs %d launches)",
					tw.ID, pt.t.ID, cmp.Text(), cmp.PText(), cmp.NTrial, cmp.NBase)
				if a, b := kernelSource(bnKernel), kernelSource(twK); a != "" && b != "" {
					if a == b {
						vline += "; batch norm runs " + a + " kernels in both"
					} else {
						vline += fmt.Sprintf("; batch norm runs %s kernels in bf16, %s in fp16", a, b)
					}
				}
				verdicts, twins = append(verdicts, vline), append(twins, tw.ID)
				if cmp.Winner() {
					addRec(fmt.Sprintf("precision: fp16 (trial %s: %s against bf16)", tw.ID, cmp.Text()))
				}
			case tw == nil && kernelSource(bnKernel) == pytorchOwn:
				addRec("sweep precision: [bf16, fp16] to measure fp16: bf16 batch norm runs " + pytorchOwn +
					" kernels here, fp16 may take cuDNN's")
			}
		}
		if !bn {
			addRec("fuse layer norm with the residual add and casts around it (one kernel forward, one backward)")
		}
	}
	ev = append(limit(ev, 8), limit(verdicts, 4)...)
	addRec("fuse normalisation with its neighbours (BN+ReLU(+add), compiled kernels)")
	return verdict{
		Status: Finding,
		Message: fmt.Sprintf("normalisation took %s of trial %s's kernel time (%d trial(s) above %s)",
			pct(share(bad[0].p)), bad[0].t.ID, len(bad), pct(limitShare)),
		Evidence:       ev,
		Trials:         append(profiledIDs(bad), twins...),
		Recommendation: strings.Join(recs, "; "),
	}
}

func checkElementwise(c *evalContext) verdict {
	all := c.run.profiles()
	if len(all) == 0 {
		return na(noProfiles)
	}
	limitShare := c.t("max_share")
	share := func(p *profile.Summary) float64 {
		return p.Share(profile.Elementwise) + p.Share(profile.Reduction) + p.Share(profile.Copy)
	}
	var bad []profiled
	worst := all[0]
	for _, pt := range all {
		if share(pt.p) > share(worst.p) {
			worst = pt
		}
		if share(pt.p) > limitShare {
			bad = append(bad, pt)
		}
	}
	if len(bad) == 0 {
		return pass("elementwise kernels, reductions and copies took at most %s of the kernel time (trial %s), below %s",
			pct(share(worst.p)), worst.t.ID, pct(limitShare))
	}
	var ev []string
	layout := false
	for _, pt := range bad {
		p := pt.p
		line := fmt.Sprintf("%s: elementwise %s, reductions %s, copies %s per step, %s of the kernel time", pt.t.label(),
			ms(p.MS(profile.Elementwise)), ms(p.MS(profile.Reduction)), ms(p.MS(profile.Copy)), pct(share(p)))
		if k := topKernel(p, profile.Elementwise, profile.Reduction, profile.Copy); k != "" {
			line += "; largest: " + shortKernel(k)
		}
		ev = append(ev, line)
		layout = layout || pt.t.knob("channels_last") == "false"
	}
	rec := "fuse elementwise chains (fused optimizer and activation kernels, compiled kernels); keep casts out of the step"
	if layout {
		rec = "channels_last: true (no NCHW↔NHWC copies around tensor-core convolutions); " + rec
	}
	return verdict{
		Status: Finding,
		Message: fmt.Sprintf("elementwise kernels, reductions and copies took %s of trial %s's kernel time (%d trial(s) above %s)",
			pct(share(bad[0].p)), bad[0].t.ID, len(bad), pct(limitShare)),
		Evidence:       limit(ev, 8),
		Trials:         profiledIDs(bad),
		Recommendation: rec,
	}
}

func checkProfileExposedComm(c *evalContext) verdict {
	all := c.run.profiles()
	if len(all) == 0 {
		return na(noProfiles)
	}
	var comm []profiled
	for _, pt := range all {
		if pt.p.CommMS > 0 {
			comm = append(comm, pt)
		}
	}
	if len(comm) == 0 {
		return na("no profiled trial ran collectives (one data-parallel rank)")
	}
	limitShare := c.t("max_exposed_share")
	exposed := func(p *profile.Summary) float64 {
		if s := profileStep(p); s > 0 {
			return p.ExposedCommMS / s
		}
		return 0
	}
	var bad []profiled
	worst := comm[0]
	for _, pt := range comm {
		if exposed(pt.p) > exposed(worst.p) {
			worst = pt
		}
		if exposed(pt.p) > limitShare {
			bad = append(bad, pt)
		}
	}
	if len(bad) == 0 {
		return pass("at most %s of a step was communication not hidden behind compute (trial %s), below %s",
			pct(exposed(worst.p)), worst.t.ID, pct(limitShare))
	}
	var ev []string
	noOverlap := false
	for _, pt := range bad {
		p := pt.p
		ev = append(ev, fmt.Sprintf("%s: communication %s per step, %s of it under compute, %s exposed (%s of the %s step)",
			pt.t.label(), ms(p.CommMS), ms(p.CommOverlapMS), ms(p.ExposedCommMS), pct(exposed(p)), ms(profileStep(p))))
		noOverlap = noOverlap || pt.t.knob("ddp.overlap") == "false"
	}
	rec := "start buckets during the backward pass (smaller ddp.first_bucket_mb, tune ddp.bucket_mb), give each rank more " +
		"compute per all-reduce (grad_accum, larger micro_batch), or send fewer bytes (ddp.compression)"
	if noOverlap {
		rec = "ddp.overlap: true (all-reduce each bucket while the backward pass goes on); " + rec
	}
	return verdict{
		Status: Finding,
		Message: fmt.Sprintf("%s of trial %s's step was communication not hidden behind compute (%d trial(s) above %s)",
			pct(exposed(bad[0].p)), bad[0].t.ID, len(bad), pct(limitShare)),
		Evidence:       limit(ev, 8),
		Trials:         profiledIDs(bad),
		Recommendation: rec,
	}
}

// profiledSet is the set of ps's trials.
func profiledSet(ps []profiled) map[*trial]bool {
	out := make(map[*trial]bool, len(ps))
	for _, p := range ps {
		out[p.t] = true
	}
	return out
}

func profiledIDs(ps []profiled) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.t.ID
	}
	return out
}

const pytorchOwn = "PyTorch's own"

// kernelSource says whose kernel a name is, for the attribution of a
// normalisation kernel: cuDNN's, PyTorch's own, the engine's own; "" unknown.
func kernelSource(name string) string {
	switch {
	case name == "":
		return ""
	case strings.Contains(strings.ToLower(name), "cudnn"):
		return "cuDNN's"
	case strings.Contains(name, "cs::cuda::"):
		return "the engine's own"
	case strings.Contains(name, "at::native::"):
		return pytorchOwn
	}
	return ""
}

// shortKernel is a kernel name without "void ", template arguments and
// parameters; a namespace's "(anonymous namespace)::" is part of the name, so
// the function name after it stays ("cs::cuda::(anonymous
// namespace)::bn_bwd_apply_kernel", not "cs::cuda::").
func shortKernel(name string) string {
	const anon = "(anonymous namespace)::"
	name = strings.TrimPrefix(name, "void ")
	from := 0
	for {
		i := strings.IndexAny(name[from:], "<(")
		if i < 0 {
			break
		}
		if strings.HasPrefix(name[from+i:], anon) {
			from += i + len(anon)
			continue
		}
		if from+i > 0 {
			name = name[:from+i]
		}
		break
	}
	if r := []rune(name); len(r) > 80 {
		name = string(r[:79]) + "…"
	}
	return name
}
