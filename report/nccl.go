package report

import (
	"fmt"
	"html/template"
	"strings"

	knobreg "github.com/casestudy/casestudy/knobs"
	prov "github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/store"
)

// NCCLEvidence is, for one trial that forces nccl.algo or nccl.proto,
// whether NCCL used the forced value for its all-reduces (read from the
// ranks' logs: NCCL_DEBUG=INFO with the TUNING subsystem).
type NCCLEvidence struct {
	Trial string `json:"trial"`
	prov.NCCLEvidence
	Status string `json:"status"` // used | not used | no evidence
}

// ncclEvidence checks every trial forcing nccl.algo or nccl.proto against
// the choices recorded for its launches.
func ncclEvidence(run *store.Run) []NCCLEvidence {
	var out []NCCLEvidence
	for _, rec := range run.Trials {
		var tunings []*store.NCCLTuning
		for _, rp := range rec.Repeats {
			for _, rk := range rp.Ranks {
				tunings = append(tunings, rk.NCCL)
			}
		}
		for _, knob := range []string{"nccl.algo", "nccl.proto"} {
			v := rec.Knobs[knob]
			if v == "" || v == "auto" || v == "default" || rec.Outcome == store.Skipped {
				continue
			}
			e := prov.CheckForcedNCCL(knob, v, tunings)
			out = append(out, NCCLEvidence{Trial: rec.ID, NCCLEvidence: e, Status: e.Status()})
		}
	}
	return out
}

func writeNCCLMD(b *strings.Builder, es []NCCLEvidence) {
	if len(es) == 0 {
		return
	}
	b.WriteString("## Did the forced NCCL settings take effect?\n\n")
	mdRow(b, []string{"trial", "forced", "NCCL used", "all-reduces", "verdict"})
	mdRow(b, []string{"---", "---", "---", "---:", "---"})
	for _, e := range es {
		mdRow(b, []string{e.Trial, e.Knob + "=" + e.Forced, strings.Join(e.Used, ", "), fmt.Sprint(e.Lines), e.Status})
	}
	b.WriteString("\nFrom NCCL's tuning lines in the ranks' logs (NCCL prints them on rank 0 with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS with TUNING, which casestudy sets for trials forcing nccl.* knobs).\n\n")
}

var ncclTemplate = template.Must(template.New("nccl").Parse(`<h2 id="nccl">Did the forced NCCL settings take effect?</h2>
<div class="tablewrap"><table>
<thead><tr><th>trial</th><th>forced</th><th>NCCL used</th><th class="num">all-reduces</th><th>verdict</th></tr></thead>
<tbody>{{range .}}<tr><td><code>{{.Trial}}</code></td><td>{{.Knob}}={{.Forced}}</td><td>{{range $i, $u := .Used}}{{if $i}}, {{end}}{{$u}}{{end}}</td><td class="num">{{.Lines}}</td><td>{{.Status}}</td></tr>
{{end}}</tbody></table></div>
<p class="muted">From NCCL's tuning lines in the ranks' logs (rank 0 prints them with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS with TUNING, which casestudy sets for trials forcing nccl.* knobs).</p>
`))

func ncclHTML(es []NCCLEvidence) template.HTML {
	if len(es) == 0 {
		return ""
	}
	var b strings.Builder
	if err := ncclTemplate.Execute(&b, es); err != nil {
		return template.HTML(template.HTMLEscapeString(err.Error()))
	}
	return template.HTML(b.String()) // #nosec: html/template escaped every value
}

// nvlsFact is what every report states about NVLink multicast (NVLS): off in
// every trial (knobs.Environment sets NCCL_NVLS_ENABLE=0), except the trials
// forcing nccl.algo NVLS or NVLSTree, which a study plans only with
// sweep.allow_nvls: true.
func nvlsFact(s *Summary) string {
	var on []string
	for _, t := range s.Trials {
		if knobreg.IsNVLS(t.Knobs["nccl.algo"]) {
			on = append(on, t.ID)
		}
	}
	if len(on) == 0 {
		return "off (NCCL_NVLS_ENABLE=0 in every trial)"
	}
	return fmt.Sprintf("off (NCCL_NVLS_ENABLE=0) except in %d trial(s) forcing nccl.algo NVLS or NVLSTree (sweep.allow_nvls): %s",
		len(on), strings.Join(on, ", "))
}
