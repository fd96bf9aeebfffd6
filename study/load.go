package study

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LoadOptions tune Load.
type LoadOptions struct {
	// AllowOutside lets extends reach files outside the studies tree.
	AllowOutside bool
	// MaxBytes caps each file's size, checked before parsing (0: DefaultMaxBytes).
	MaxBytes int64
	// Root is the studies tree extends must stay in ("": the nearest ancestor
	// directory of the file named "studies", else the file's directory).
	Root string
}

// Source is one file of a study's extends chain.
type Source struct {
	Path   string
	SHA256 string
	Text   []byte
}

// Load reads a study file and the files it extends, checks everything against
// the knob registry and returns the merged study. Every problem of the files is
// reported at once in an *Error (exit status 2), as file:line:col: message.
func Load(path string, opts LoadOptions) (*Study, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	root, err := studiesRoot(path, opts.Root)
	if err != nil {
		return nil, &Error{Problems: []Problem{{Pos: Pos{File: path}, Msg: err.Error()}}}
	}
	ps := &problems{}
	var chain []*rawStudy // child first
	var sources []Source
	seen := map[string]string{}
	cur, from := path, Pos{}
	for depth := 0; ; depth++ {
		if depth >= maxExtends {
			ps.add(from, "extends chain longer than %d files", maxExtends)
			break
		}
		real, err := filepath.EvalSymlinks(cur)
		if err != nil {
			if from.File == "" {
				ps.add(Pos{File: cur}, "cannot read study: %v", unwrapPathError(err))
			} else {
				ps.add(from, "extends %q: %v", cur, unwrapPathError(err))
			}
			break
		}
		real, _ = filepath.Abs(real)
		if prev, ok := seen[real]; ok {
			ps.add(from, "extends cycle: %s extends %s again", from.File, prev)
			break
		}
		seen[real] = cur
		data, err := readLimited(cur, opts.MaxBytes)
		if err != nil {
			if from.File == "" {
				ps.add(Pos{File: cur}, "%v", unwrapPathError(err))
			} else {
				ps.add(from, "extends %q: %v", chain[len(chain)-1].Ext.V, unwrapPathError(err))
			}
			break
		}
		sum := sha256.Sum256(data)
		sources = append(sources, Source{Path: cur, SHA256: hex.EncodeToString(sum[:]), Text: data})
		node, err := parseYAML(cur, data)
		if err != nil {
			ps.list = append(ps.list, problemAt(cur, err))
			break
		}
		raw := decodeFile(cur, node, ps)
		if raw == nil {
			break
		}
		checkFileConflicts(raw, ps)
		chain = append(chain, raw)
		if !raw.Ext.Set || raw.Ext.Bad {
			break
		}
		next := raw.Ext.V
		if !filepath.IsAbs(next) {
			next = filepath.Join(filepath.Dir(cur), next)
		}
		if !opts.AllowOutside {
			if ok, why := inside(root, next); !ok {
				ps.add(raw.Ext.Pos, "extends %q: %s (pass --allow-outside to permit it)", raw.Ext.V, why)
				break
			}
		}
		cur, from = next, raw.Ext.Pos
	}
	if len(chain) == 0 {
		if len(ps.list) == 0 {
			ps.add(Pos{File: path}, "not a study")
		}
		return nil, ps.err()
	}
	merged := chain[len(chain)-1]
	for i := len(chain) - 2; i >= 0; i-- {
		merged = merge(merged, chain[i])
	}
	s := build(merged, chain[0], ps)
	if err := ps.err(); err != nil {
		return nil, err
	}
	s.Path = path
	s.Text = sources[0].Text
	s.SHA256 = sources[0].SHA256
	s.Sources = sources
	return s, nil
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// studiesRoot finds the tree extends must stay in.
func studiesRoot(path, root string) (string, error) {
	if root != "" {
		return canonicalDir(root)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(abs)
	for d := dir; ; d = filepath.Dir(d) {
		if filepath.Base(d) == "studies" {
			return canonicalDir(d)
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return canonicalDir(dir)
}

func canonicalDir(d string) (string, error) {
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real, nil
	}
	return abs, nil
}

// inside reports whether path (after symlinks) lies under root.
func inside(root, path string) (bool, string) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false, err.Error()
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		real = abs // reported when it is read
	}
	rel, err := filepath.Rel(root, real)
	if err != nil || !filepath.IsLocal(rel) {
		return false, fmt.Sprintf("resolves to %s, outside the studies tree %s", real, root)
	}
	return true, ""
}

// checkFileConflicts reports settings one file makes twice with different values.
func checkFileConflicts(r *rawStudy, ps *problems) {
	for name, mv := range r.ModelKnobs.Values {
		if bv, ok := r.Baseline.Values[name]; ok && !mv.Bad && !bv.Bad && mv.V != bv.V {
			ps.add(bv.Pos, "baseline %s: %s contradicts model.%s: %s at line %d; set it in one place", name, bv.V, name, mv.V, mv.Pos.Line)
		}
	}
	if bv, ok := r.Baseline.Values["procs_per_gpu"]; ok && r.ProcsPerGPU.Set && !r.ProcsPerGPU.Bad && !bv.Bad && bv.V != r.ProcsPerGPU.V {
		ps.add(bv.Pos, "baseline procs_per_gpu: %s contradicts workload.procs_per_gpu: %s at line %d; set it in one place", bv.V, r.ProcsPerGPU.V, r.ProcsPerGPU.Pos.Line)
	}
}

// merge returns parent overridden by child: fields the child sets win;
// baseline, model knobs, launcher and checklist thresholds merge key by key;
// a child's sweep replaces the parent's whole.
func merge(p, c *rawStudy) *rawStudy {
	m := *c
	pick := func(pv, cv *val[string]) {
		if !cv.Set {
			*cv = *pv
		}
	}
	pickInt := func(pv, cv *val[int]) {
		if !cv.Set {
			*cv = *pv
		}
	}
	pick(&p.Description, &m.Description)
	pick(&p.Family, &m.Family)
	pick(&p.Preset, &m.Preset)
	pickInt(&p.Layers, &m.Layers)
	pickInt(&p.Hidden, &m.Hidden)
	pickInt(&p.GPUs, &m.GPUs)
	pickInt(&p.Nodes, &m.Nodes)
	pickInt(&p.Ranks, &m.Ranks)
	pickInt(&p.Warmup, &m.Warmup)
	pickInt(&p.Steps, &m.Steps)
	if !m.WarmupSec.Set {
		m.WarmupSec = p.WarmupSec
	}
	if !m.MeasureSec.Set {
		m.MeasureSec = p.MeasureSec
	}
	pickInt(&p.Repeats, &m.Repeats)
	pickInt(&p.MinRepeats, &m.MinRepeats)
	pickInt(&p.MaxRepeats, &m.MaxRepeats)
	if !m.MaxTime.Set {
		m.MaxTime = p.MaxTime
	}
	pickInt(&p.Threads, &m.Threads)
	pick(&p.Device, &m.Device)
	pick(&p.ProcsPerGPU, &m.ProcsPerGPU)
	pick(&p.Metric, &m.Metric)
	pick(&p.Goal, &m.Goal)
	pick(&p.CompareBase, &m.CompareBase)
	if !m.Timeout.Set {
		m.Timeout = p.Timeout
	}
	if !m.Seed.Set {
		m.Seed = p.Seed
	}
	if !m.Interleave.Set {
		m.Interleave = p.Interleave
	}
	if !m.Rehearse.Set {
		m.Rehearse = p.Rehearse
	}
	if !m.WorldOfOne.Set {
		m.WorldOfOne = p.WorldOfOne
	}
	if !m.Threshold.Set {
		m.Threshold = p.Threshold
	}
	if !m.Disable.Set {
		m.Disable = p.Disable
	}
	if !m.Formats.Set {
		m.Formats = p.Formats
	}
	if m.Sweep == nil {
		m.Sweep = p.Sweep
	}
	m.ModelKnobs = mergePoints(p.ModelKnobs, c.ModelKnobs)
	m.Baseline = mergePoints(p.Baseline, c.Baseline)
	// A child's model/workload setting of a knob beats a parent's baseline of it.
	for name, v := range c.ModelKnobs.Values {
		if _, own := c.Baseline.Values[name]; !own {
			delete(m.Baseline.Values, name)
			m.ModelKnobs.set(name, v)
		}
	}
	if c.ProcsPerGPU.Set {
		if _, own := c.Baseline.Values["procs_per_gpu"]; !own {
			delete(m.Baseline.Values, "procs_per_gpu")
		}
	}
	m.Launcher = map[string]val[string]{}
	for k, v := range p.Launcher {
		m.Launcher[k] = v
	}
	for k, v := range c.Launcher {
		m.Launcher[k] = v
	}
	m.ChecklistPos = map[string]Pos{}
	for _, src := range []map[string]Pos{p.ChecklistPos, c.ChecklistPos} {
		for k, v := range src {
			m.ChecklistPos[k] = v
		}
	}
	m.Thresholds = map[string]map[string]val[float64]{}
	for _, src := range []map[string]map[string]val[float64]{p.Thresholds, c.Thresholds} {
		for rule, t := range src {
			if m.Thresholds[rule] == nil {
				m.Thresholds[rule] = map[string]val[float64]{}
			}
			for k, v := range t {
				m.Thresholds[rule][k] = v
			}
		}
	}
	return &m
}

func mergePoints(p, c *point) *point {
	m := newPoint(c.Pos)
	for _, src := range []*point{p, c} {
		for _, name := range src.Order {
			m.set(name, src.Values[name])
		}
	}
	return m
}

// resolveRelative makes a path written in a study file relative to that file.
func resolveRelative(file, p string) string {
	if p == "" || filepath.IsAbs(p) || strings.Contains(p, "://") {
		return p
	}
	return filepath.Join(filepath.Dir(file), p)
}
