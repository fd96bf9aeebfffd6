package checklist

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// Counts is how many results have each status.
type Counts struct {
	Findings      int `json:"finding"`
	Pass          int `json:"pass"`
	NotApplicable int `json:"not_applicable"`
}

// Count tallies results by status.
func Count(results []Result) Counts {
	var c Counts
	for _, r := range results {
		switch r.Status {
		case Finding:
			c.Findings++
		case Pass:
			c.Pass++
		case NotApplicable:
			c.NotApplicable++
		}
	}
	return c
}

// WriteText writes results as a readable report grouped by status: findings
// (most severe first) with evidence and recommendation, then a table of
// passes, then a table of rules that did not apply and why.
func WriteText(w io.Writer, title string, results []Result) error {
	c := Count(results)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d finding(s), %d pass, %d not applicable\n", title, c.Findings, c.Pass, c.NotApplicable)

	var findings []Result
	for _, r := range results {
		if r.Status == Finding {
			findings = append(findings, r)
		}
	}
	sort.SliceStable(findings, func(i, j int) bool {
		return SeverityRank(findings[i].Severity) > SeverityRank(findings[j].Severity)
	})
	if len(findings) > 0 {
		b.WriteString("\nFINDINGS\n")
		for _, r := range findings {
			fmt.Fprintf(&b, "\n%-7s  %s  (ch %d) %s\n", strings.ToUpper(string(r.Severity)), r.RuleID, r.Chapter, r.Title)
			fmt.Fprintf(&b, "  %s\n", r.Message)
			for _, e := range r.Evidence {
				fmt.Fprintf(&b, "    · %s\n", e)
			}
			if r.Recommendation != "" {
				fmt.Fprintf(&b, "  → %s\n", r.Recommendation)
			}
		}
	}
	for _, group := range []struct {
		status Status
		title  string
	}{{Pass, "PASS"}, {NotApplicable, "NOT APPLICABLE"}} {
		var rows []Result
		for _, r := range results {
			if r.Status == group.status {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s\n", group.title)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, r := range rows {
			fmt.Fprintf(tw, "  %s\t%s\n", r.RuleID, r.Message)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteRules writes the registry as a table: ID, severity, chapter, title and
// thresholds with their defaults.
func WriteRules(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tSEVERITY\tCH\tTITLE\tTHRESHOLDS")
	for _, r := range registry {
		var th []string
		for _, t := range r.Thresholds {
			th = append(th, t.Name+"="+num(t.Default))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.ID, r.Severity, r.Chapter, r.Title, strings.Join(th, " "))
	}
	return tw.Flush()
}
