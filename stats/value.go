package stats

import (
	"encoding/json"
	"math"

	mstats "github.com/aclements/go-moremath/stats"
	"gonum.org/v1/gonum/stat/distuv"
)

// Value is a trial's one number: the geometric mean of its launch values
// (the mean of y = ln value, back-transformed), with a Student t interval of
// that mean over launches. With one launch there is no interval (Lo, Hi are
// -Inf/+Inf, null in JSON): the estimate stands alone.
type Value struct {
	Center     float64 `json:"center"`
	Lo         float64 `json:"lo"`
	Hi         float64 `json:"hi"`
	Confidence float64 `json:"confidence"`
	N          int     `json:"n"`  // clean launches
	CV         float64 `json:"cv"` // launch-to-launch coefficient of variation (0 below two launches)
}

// Bounded reports whether the value has an interval (two launches or more).
func (v Value) Bounded() bool {
	return v.N > 1 && !math.IsInf(v.Lo, 0) && !math.IsInf(v.Hi, 0)
}

// ValueOf summarises launch values (all > 0) at the given confidence.
func ValueOf(values []float64, confidence float64) Value {
	v := Value{Lo: math.Inf(-1), Hi: math.Inf(1), Confidence: confidence, N: len(values)}
	if len(values) == 0 {
		return v
	}
	ys := logs(values)
	s := mstats.Sample{Xs: ys}
	mean := s.Mean()
	v.Center = math.Exp(mean)
	if len(values) < 2 {
		return v
	}
	v.CV = DescribeOf(values).CV
	se := s.StdDev() / math.Sqrt(float64(len(ys)))
	hw := tQuantile(confidence, float64(len(ys)-1)) * se
	v.Lo, v.Hi = math.Exp(mean-hw), math.Exp(mean+hw)
	return v
}

// logs is ln of each value.
func logs(xs []float64) []float64 {
	ys := make([]float64, len(xs))
	for i, x := range xs {
		ys[i] = math.Log(x)
	}
	return ys
}

// tQuantile is the two-sided critical value of Student's t with df degrees of
// freedom at the given confidence (gonum's distuv).
func tQuantile(confidence, df float64) float64 {
	if df <= 0 || math.IsNaN(df) {
		return math.Inf(1)
	}
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - (1-confidence)/2)
}

type valueJSON struct {
	Center     float64  `json:"center"`
	Lo         *float64 `json:"lo"`
	Hi         *float64 `json:"hi"`
	Confidence float64  `json:"confidence"`
	N          int      `json:"n"`
	CV         *float64 `json:"cv"` // null below two launches
}

// MarshalJSON writes a missing interval as null ends.
func (v Value) MarshalJSON() ([]byte, error) {
	return json.Marshal(valueJSON{Center: finite(v.Center), Lo: bound(v.Lo), Hi: bound(v.Hi),
		Confidence: v.Confidence, N: v.N, CV: cvJSON(v)})
}

func cvJSON(v Value) *float64 {
	if v.N < 2 {
		return nil
	}
	return bound(v.CV)
}

// UnmarshalJSON reads null ends as -Inf (lo) and +Inf (hi).
func (v *Value) UnmarshalJSON(b []byte) error {
	var j valueJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*v = Value{Center: j.Center, Lo: math.Inf(-1), Hi: math.Inf(1), Confidence: j.Confidence, N: j.N}
	if j.CV != nil {
		v.CV = *j.CV
	}
	if j.Lo != nil {
		v.Lo = *j.Lo
	}
	if j.Hi != nil {
		v.Hi = *j.Hi
	}
	return nil
}
