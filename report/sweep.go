package report

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// Sweep strategies (study-format.md); the charts are chosen by them.
const (
	StrategyOneAtATime = "one-at-a-time"
	StrategyGrid       = "grid"
	StrategyGreedy     = "greedy"
	StrategyList       = "list"
)

// sweepStrategy is the study text's sweep.strategy. A study that inherits its
// sweep (extends) has none in its text: the strategy is then read off the
// trials: each changes at most one knob (one-at-a-time), or more (list, drawn
// trial by trial).
func sweepStrategy(text string, trials []Trial) string {
	if n := studySweep(text); n != nil {
		if v := mapValue(n, "strategy"); v != nil && v.Kind == yaml.ScalarNode {
			switch s := strings.TrimSpace(v.Value); s {
			case StrategyOneAtATime, StrategyGrid, StrategyGreedy, StrategyList:
				return s
			}
		}
	}
	for _, t := range trials {
		if len(t.Changed) > 1 {
			return StrategyList
		}
	}
	return StrategyOneAtATime
}

// studySweepValues are the values listed under sweep.knobs in the study text,
// in the order written (nil when the text has none).
func studySweepValues(text string) map[string][]string {
	knobs := mapValue(studySweep(text), "knobs")
	if knobs == nil || knobs.Kind != yaml.MappingNode {
		return nil
	}
	out := map[string][]string{}
	for i := 0; i+1 < len(knobs.Content); i += 2 {
		list := knobs.Content[i+1]
		if list.Kind != yaml.SequenceNode {
			continue
		}
		for _, v := range list.Content {
			if v.Kind == yaml.ScalarNode {
				out[knobs.Content[i].Value] = append(out[knobs.Content[i].Value], v.Value)
			}
		}
	}
	return out
}

func studySweep(text string) *yaml.Node {
	var doc yaml.Node
	if text == "" || yaml.Unmarshal([]byte(text), &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	return mapValue(doc.Content[0], "sweep")
}
