package course_test

import (
	"testing"

	"github.com/casestudy/casestudy/checklist"
	"github.com/casestudy/casestudy/internal/course"
	"github.com/casestudy/casestudy/knobs"
)

// TestEveryCitationIsAChapter: each knob and checklist rule cites a chapter
// of the course.
func TestEveryCitationIsAChapter(t *testing.T) {
	for _, k := range knobs.All() {
		if course.Topic(k.Chapter) == "" {
			t.Errorf("knob %s cites chapter %d", k.Name, k.Chapter)
		}
	}
	for _, r := range checklist.Rules() {
		if course.Topic(r.Chapter) == "" {
			t.Errorf("rule %s cites chapter %d", r.ID, r.Chapter)
		}
	}
}
