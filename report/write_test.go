package report

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/study"
)

// TestFormatsAgreeWithStudy: every format a study may list has a file, and no
// other format does.
func TestFormatsAgreeWithStudy(t *testing.T) {
	assert.ElementsMatch(t, study.ReportFormats, slices.Collect(maps.Keys(Formats)))
	assert.Equal(t, study.ReportFormats, DefaultFormats)
}

func TestParseFormats(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "html,md,json", want: []string{"html", "md", "json"}},
		{in: " MD , json,", want: []string{"md", "json"}},
		{in: "pdf", err: `unknown report format "pdf": use html, md or json`},
		{in: " , ", err: "no report format given"},
	} {
		got, err := ParseFormats(tc.in)
		if tc.err != "" {
			require.Error(t, err, tc.in)
			assert.Contains(t, err.Error(), tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
}
