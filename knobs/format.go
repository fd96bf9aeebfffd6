package knobs

import (
	"maps"
	"slices"
	"strings"
)

// Join writes knob values as "name=value" pairs joined by sep, in the order of
// names, or in name order when names is nil. study.FormatKnobs, the report's
// knob lists and the checklist's trial labels all go through it.
func Join(values map[string]string, names []string, sep string) string {
	if names == nil {
		names = slices.Sorted(maps.Keys(values))
	}
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, n+"="+values[n])
	}
	return strings.Join(parts, sep)
}
