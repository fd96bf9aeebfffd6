package study

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The annotated example of docs/study-format.md must itself be a valid study.
func TestStudyFormatExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/study-format.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(doc)
	require.NotNil(t, m, "docs/study-format.md has a yaml example")
	example := string(m[1])
	dir := writeStudies(t, map[string]string{
		"bert.yaml":         "name: parent\nmodel: {family: bert, preset: base}\n",
		"bert/example.yaml": example,
	})
	s, err := Load(filepath.Join(dir, "bert", "example.yaml"), LoadOptions{})
	require.NoError(t, err)
	assert.Equal(t, "bert-large-tuning", s.Name)
	assert.Equal(t, "large", s.Model.Preset)
	p, err := Expand(s, ExpandOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, p.Trials)
	assert.True(t, strings.HasPrefix(example, "#"))
}
