package study

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Limits on hostile input. A study is a few kilobytes; these leave room for
// large generated sweeps and refuse anything built to exhaust memory.
const (
	DefaultMaxBytes = 1 << 20 // file size, checked before parsing
	maxNodes        = 100000  // YAML nodes after expanding aliases (billion laughs)
	maxDepth        = 32      // nesting of mappings and sequences
	maxExtends      = 16      // length of an extends chain
)

// readLimited reads at most max bytes of path and refuses larger files before
// any parsing.
func readLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("is a directory, not a study file")
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than the %d-byte limit for a study file", max)
	}
	return data, nil
}

// parseYAML parses one YAML document into a node tree and refuses alias bombs,
// recursive aliases and deep nesting. It never panics.
func parseYAML(file string, data []byte) (root *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, fmt.Errorf("invalid YAML: %v", r)
		}
	}()
	if err := checkText(data); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("empty file: a study needs at least name and model")
		}
		return nil, yamlError(data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlError(data, err)
		}
		return nil, fmt.Errorf("line %d: more than one YAML document (---); a study file holds one", extra.Line)
	}
	if err := checkSize(&doc); err != nil {
		return nil, err
	}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, fmt.Errorf("empty file: a study needs at least name and model")
		}
		return doc.Content[0], nil
	}
	return &doc, nil
}

// checkText refuses bytes YAML cannot hold, naming where the first one is
// (the YAML parser's own message has no position): text that is not UTF-8
// (Latin-1, UTF-16 without a byte-order mark) and control characters other
// than tab, newline and carriage return. UTF-16 and UTF-32 with a byte-order
// mark are left to the parser, which reads them.
func checkText(data []byte) error {
	if bytes.HasPrefix(data, []byte{0xfe, 0xff}) || bytes.HasPrefix(data, []byte{0xff, 0xfe}) {
		return nil
	}
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return fmt.Errorf("line %d: column %d: not UTF-8 text: byte 0x%02x; save the file as UTF-8", line, col, data[i])
		case r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0x7f:
			return fmt.Errorf("line %d: column %d: control character 0x%02x; a study is plain text", line, col, r)
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += size
	}
	return nil
}

// yamlError words a parse error of yaml.v3 as "invalid YAML: line N: column
// C: ...", for problemAt to place. yaml.v3 leaves the line out when the error
// is on the first line (its marks count from 0 and 0 reads as unknown), so such
// an error is placed on line 1; where the message is about a character that
// cannot start a token, the column is that character's on the line. A tab gets
// the fix: indent with spaces.
func yamlError(data []byte, err error) error {
	msg := trimYAMLError(err)
	line := 1
	m := yamlLine.FindStringSubmatch(msg)
	if m != nil {
		line, _ = strconv.Atoi(m[1])
	}
	text := lineOf(data, line)
	if strings.Contains(msg, "cannot start any token") && (m == nil || m[2] == "") {
		if col := badTokenColumn(text); col > 0 {
			msg = fmt.Sprintf("line %d: column %d: %s", line, col, yamlLine.ReplaceAllString(msg, ""))
		}
	}
	if !yamlLine.MatchString(msg) {
		msg = "line 1: " + msg
	}
	switch {
	case strings.Contains(msg, "tab character"), strings.Contains(msg, "cannot start any token") && bytes.IndexByte(text, '\t') >= 0:
		msg += " (YAML indents with spaces, not tabs: replace the tab with spaces)"
	case strings.Contains(msg, "cannot start any token"):
		msg += " (quote a value that begins with @ or `)"
	}
	return fmt.Errorf("invalid YAML: %s", msg)
}

// lineOf is the text of data's 1-based line n (nil for UTF-16/32 text, whose
// columns are not bytes, and past the end).
func lineOf(data []byte, n int) []byte {
	if bytes.HasPrefix(data, []byte{0xfe, 0xff}) || bytes.HasPrefix(data, []byte{0xff, 0xfe}) || bytes.HasPrefix(data, []byte{0, 0}) {
		return nil
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	for ; n > 1; n-- {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return nil
		}
		data = data[i+1:]
	}
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		data = data[:i]
	}
	return data
}

// badTokenColumn is the 1-based column of the first character of line that
// YAML cannot start a token with (a tab, @ or `), 0 if none.
func badTokenColumn(line []byte) int {
	col := 0
	for _, r := range string(line) {
		col++
		if r == '\t' || r == '@' || r == '`' {
			return col
		}
	}
	return 0
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (?:column (\d+): )?`)

func trimYAMLError(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// problemAt turns a parse error into a Problem, with the line when the message
// names one ("line 3: ...").
func problemAt(file string, err error) Problem {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(strings.TrimPrefix(msg, "invalid YAML: ")); m != nil {
		line, _ := strconv.Atoi(m[1])
		col := 1
		if m[2] != "" {
			col, _ = strconv.Atoi(m[2])
		}
		rest := yamlLine.ReplaceAllString(strings.TrimPrefix(msg, "invalid YAML: "), "")
		if strings.HasPrefix(msg, "invalid YAML: ") {
			rest = "invalid YAML: " + rest
		}
		return Problem{Pos: Pos{File: file, Line: line, Col: col}, Msg: rest}
	}
	return Problem{Pos: Pos{File: file}, Msg: msg}
}

// checkSize counts the nodes and depth of the tree with aliases expanded,
// memoised per node so that the count itself stays cheap, and refuses trees
// past the limits and aliases that refer to their own ancestors.
func checkSize(root *yaml.Node) error {
	type stat struct{ nodes, depth int }
	memo := map[*yaml.Node]stat{}
	aliases := 0
	active := map[*yaml.Node]bool{}
	var walk func(n *yaml.Node) (stat, error)
	walk = func(n *yaml.Node) (stat, error) {
		if s, ok := memo[n]; ok {
			return s, nil
		}
		if active[n] {
			return stat{}, fmt.Errorf("line %d: an alias refers to a node that contains it", n.Line)
		}
		active[n] = true
		defer delete(active, n)
		s := stat{nodes: 1, depth: 1}
		kids := n.Content
		if n.Kind == yaml.AliasNode {
			aliases++
			if n.Alias == nil {
				return stat{}, fmt.Errorf("line %d: alias to an unknown anchor", n.Line)
			}
			kids = []*yaml.Node{n.Alias}
			s.depth = 0
		}
		for _, c := range kids {
			cs, err := walk(c)
			if err != nil {
				return stat{}, err
			}
			s.nodes += cs.nodes
			s.depth = max(s.depth, cs.depth+1)
			if s.nodes > maxNodes {
				if aliases > 0 {
					return stat{}, fmt.Errorf("line %d: the document expands to more than %d YAML nodes through its aliases; refusing it as an alias bomb", n.Line, maxNodes)
				}
				return stat{}, fmt.Errorf("line %d: the document has more than %d YAML nodes; a study is far smaller", n.Line, maxNodes)
			}
			if s.depth > maxDepth {
				return stat{}, fmt.Errorf("line %d: nesting deeper than %d levels", c.Line, maxDepth)
			}
		}
		memo[n] = s
		return s, nil
	}
	_, err := walk(root)
	return err
}

// deref follows aliases (bounded: checkSize ran first).
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < maxDepth; i++ {
		n = n.Alias
	}
	return n
}

// kindName says what a node is, for "expected X, got Y" errors.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "nothing (null)"
		case "!!bool":
			return "a boolean"
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}
