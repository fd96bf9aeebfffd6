package course

import "testing"

func TestTopics(t *testing.T) {
	for n := 1; n <= Chapters; n++ {
		if Topic(n) == "" {
			t.Errorf("chapter %d has no topic", n)
		}
	}
	if Chapters != 30 || Topic(0) != "" || Topic(31) != "" || Cite(23) != "chapter 23, mixed precision" {
		t.Errorf("Chapters %d, Topic(0) %q, Topic(31) %q, Cite(23) %q", Chapters, Topic(0), Topic(31), Cite(23))
	}
}
