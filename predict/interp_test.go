package predict

import "testing"

// Between two measured sizes the time is on the straight line between them,
// at a measured size its (mean) time, outside the sizes the fallback's.
func TestInterpolatedClosedForms(t *testing.T) {
	fb := fixed{latMS: 100}
	m, err := NewInterpolated([]Point{{Bytes: 4 << 20, MS: 3}, {Bytes: 1 << 20, MS: 1}, {Bytes: 1 << 20, MS: 2},
		{Bytes: 16 << 20, MS: 11}}, 8, "bench", fb)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bytes int64
		want  float64
		how   string
	}{
		{1 << 20, 1.5, "bench point"},                      // the mean of its two points
		{4 << 20, 3, "bench point"},                        // a measured size
		{10 << 20, 3 + 0.5*8, "interpolated"},              // halfway from 4 to 16 MiB
		{(1 << 20) + (3<<20)/3, 1.5 + 0.5, "interpolated"}, // a third of the way from 1 to 4 MiB
		{64 << 20, 100, "fixed"},                           // past the largest: the fallback
		{1 << 10, 100, "fixed"},                            // below the smallest
	} {
		got, how, err := m.Time(AllReduce, c.bytes, 8)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "time", got, c.want)
		if how != c.how {
			t.Errorf("%d bytes: %q, want %q", c.bytes, how, c.how)
		}
	}
	if got, _, _ := m.Time(AllReduce, 4<<20, 4); got != 100 {
		t.Errorf("another rank count: %g, want the fallback's 100", got)
	}
	if got, _, _ := m.Time(AllGather, 4<<20, 8); got != 100 {
		t.Errorf("an all-gather: %g, want the fallback's 100", got)
	}
	if _, err := NewInterpolated([]Point{{Bytes: 1, MS: 1}, {Bytes: 1, MS: 2}}, 8, "x", nil); err == nil {
		t.Error("one size: want an error")
	}
	if _, _, err := (Interpolated{Ranks: 8, Points: m.Points}).Time(AllReduce, 64<<20, 8); err == nil {
		t.Error("outside the points without a fallback: want an error")
	}
}

// The band's evidence: each inner size from its neighbours alone. Sizes 1, 2,
// 4 MiB at 1, 3, 4 ms: 2 MiB from the line through 1 and 4 MiB is 2 ms, 1/3
// under its 3 ms.
func TestInterpolatedLeaveOneOut(t *testing.T) {
	m, err := NewInterpolated([]Point{{Bytes: 1 << 20, MS: 1}, {Bytes: 2 << 20, MS: 3}, {Bytes: 4 << 20, MS: 4}}, 2, "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := m.LeaveOneOutError()
	if !ok {
		t.Fatal("three sizes: want an error estimate")
	}
	near(t, "leave-one-out", e, 1.0/3)
	two, _ := NewInterpolated([]Point{{Bytes: 1, MS: 1}, {Bytes: 2, MS: 2}}, 2, "b", nil)
	if _, ok := two.LeaveOneOutError(); ok {
		t.Error("two sizes: no inner size to leave out")
	}
}
