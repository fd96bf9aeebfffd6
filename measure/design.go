package measure

import (
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// DesignOf is the design a run recorded; runs made before it was recorded
// had a fixed number of repeats.
func DesignOf(m *store.Manifest) stats.Design {
	if m.Measurement != nil && m.Measurement.LookAlpha > 0 {
		return DesignFromRecord(*m.Measurement)
	}
	il, _ := m.Workload["interleave"].(bool)
	return stats.FixedDesign(int(stats.Number(m.Workload["repeats"])), il)
}

// DesignFromRecord is the design manifest.json stores as m (the same fields).
func DesignFromRecord(m store.Measurement) stats.Design {
	return stats.Design(m)
}

// DesignRecord is the design d as manifest.json stores it.
func DesignRecord(d stats.Design) *store.Measurement {
	m := store.Measurement(d)
	return &m
}
