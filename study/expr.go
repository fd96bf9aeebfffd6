package study

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/casestudy/casestudy/knobs"
)

// Constraint expressions (sweep.constraints) are a small language over a
// trial's resolved knobs (docs/study-format.md):
//
//	expr := or;  or := and {"||" and};  and := unary {"&&" unary}
//	unary := "!" unary | "(" expr ")" | operand [cmp operand]
//	cmp := == | != | < | <= | > | >=
//	operand := knob name | variable | value | "quoted value"
//
// Variables: ranks (ranks of the trial), dp (data-parallel ranks = ranks /
// pipeline.stages), gpus, nodes, device, family, preset. A value compared with
// a knob is checked against the knob's domain and compared in canonical form
// (precision != FP16 works; nccl.buffsize <= 4MiB compares bytes). An operand
// alone must be a boolean knob (graphs, !channels_last). Ordering comparisons
// need numbers; one with a value of auto holds (auto is the library's choice).
type Expr struct {
	Src  string
	root exprNode
}

var exprVars = map[string]bool{"ranks": true, "dp": true, "gpus": true, "nodes": true, // numeric
	"device": false, "family": false, "preset": false}

type exprNode interface {
	eval(get func(string) string) bool
}

type (
	orNode  struct{ l, r exprNode }
	andNode struct{ l, r exprNode }
	notNode struct{ x exprNode }
	refNode struct{ name string } // a boolean knob
	cmpNode struct {
		op   string
		l, r operand
	}
	operand struct {
		ref  string // knob or variable name; "" for a literal
		lit  string
		auto bool // literal "auto"
	}
)

func (n orNode) eval(g func(string) string) bool  { return n.l.eval(g) || n.r.eval(g) }
func (n andNode) eval(g func(string) string) bool { return n.l.eval(g) && n.r.eval(g) }
func (n notNode) eval(g func(string) string) bool { return !n.x.eval(g) }
func (n refNode) eval(g func(string) string) bool { return g(n.name) == "true" }

func (o operand) value(g func(string) string) string {
	if o.ref != "" {
		return g(o.ref)
	}
	return o.lit
}

func (n cmpNode) eval(g func(string) string) bool {
	l, r := n.l.value(g), n.r.value(g)
	switch n.op {
	case "==":
		return l == r
	case "!=":
		return l != r
	}
	lf, err1 := strconv.ParseFloat(l, 64)
	rf, err2 := strconv.ParseFloat(r, 64)
	if err1 != nil || err2 != nil {
		return true // auto: left to the library, the constraint does not apply
	}
	switch n.op {
	case "<":
		return lf < rf
	case "<=":
		return lf <= rf
	case ">":
		return lf > rf
	default:
		return lf >= rf
	}
}

// Eval evaluates the expression with get returning a knob's or variable's value.
func (e *Expr) Eval(get func(name string) string) bool { return e.root.eval(get) }

// ParseExpr parses and checks a constraint against the knob registry.
func ParseExpr(src string) (*Expr, error) {
	toks, err := lexExpr(src)
	if err != nil {
		return nil, err
	}
	p := &exprParser{toks: toks}
	root, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.i < len(p.toks) {
		return nil, fmt.Errorf("unexpected %q at character %d", p.toks[p.i].text, p.toks[p.i].at+1)
	}
	return &Expr{Src: src, root: root}, nil
}

type token struct {
	text   string
	quoted bool
	op     bool
	at     int
}

func lexExpr(src string) ([]token, error) {
	var out []token
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == '"' || c == '\'':
			j := strings.IndexByte(src[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated quote at character %d", i+1)
			}
			out = append(out, token{text: src[i+1 : i+1+j], quoted: true, at: i})
			i += j + 2
		case strings.HasPrefix(src[i:], "&&") || strings.HasPrefix(src[i:], "||") || strings.HasPrefix(src[i:], "==") ||
			strings.HasPrefix(src[i:], "!=") || strings.HasPrefix(src[i:], "<=") || strings.HasPrefix(src[i:], ">="):
			out = append(out, token{text: src[i : i+2], op: true, at: i})
			i += 2
		case strings.ContainsRune("<>!()", rune(c)):
			out = append(out, token{text: string(c), op: true, at: i})
			i++
		case isWordByte(c):
			j := i
			for j < len(src) && isWordByte(src[j]) {
				j++
			}
			out = append(out, token{text: src[i:j], at: i})
			i = j
		default:
			return nil, fmt.Errorf("unexpected character %q at character %d (operators: == != < <= > >= && || ! ( ))", c, i+1)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty expression")
	}
	return out, nil
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_.:-+", c) >= 0
}

type exprParser struct {
	toks []token
	i    int
}

func (p *exprParser) peek(op string) bool {
	return p.i < len(p.toks) && p.toks[p.i].op && p.toks[p.i].text == op
}

func (p *exprParser) or() (exprNode, error) {
	l, err := p.and()
	for err == nil && p.peek("||") {
		p.i++
		var r exprNode
		if r, err = p.and(); err == nil {
			l = orNode{l, r}
		}
	}
	return l, err
}

func (p *exprParser) and() (exprNode, error) {
	l, err := p.unary()
	for err == nil && p.peek("&&") {
		p.i++
		var r exprNode
		if r, err = p.unary(); err == nil {
			l = andNode{l, r}
		}
	}
	return l, err
}

func (p *exprParser) unary() (exprNode, error) {
	if p.i >= len(p.toks) {
		return nil, fmt.Errorf("expression ends too early")
	}
	switch {
	case p.peek("!"):
		p.i++
		x, err := p.unary()
		return notNode{x}, err
	case p.peek("("):
		p.i++
		x, err := p.or()
		if err != nil {
			return nil, err
		}
		if !p.peek(")") {
			return nil, fmt.Errorf("missing ) for the ( at character %d", p.toks[p.i-1].at+1)
		}
		p.i++
		return x, nil
	}
	lt, err := p.word()
	if err != nil {
		return nil, err
	}
	if p.i < len(p.toks) && p.toks[p.i].op && strings.Contains("== != < <= > >=", p.toks[p.i].text) && p.toks[p.i].text != "!" {
		op := p.toks[p.i].text
		p.i++
		rt, err := p.word()
		if err != nil {
			return nil, err
		}
		return comparison(op, lt, rt)
	}
	// An operand alone: a boolean knob.
	k, ok := knobs.Lookup(lt.text)
	if lt.quoted || !ok {
		return nil, fmt.Errorf("%q is not a boolean knob%s", lt.text, didYouMean(knobs.Suggest(lt.text)))
	}
	if k.Type != knobs.Bool {
		return nil, fmt.Errorf("%s is a %s knob: compare it (e.g. %s == %s)", k.Name, k.Type, k.Name, k.Default)
	}
	return refNode{k.Name}, nil
}

func (p *exprParser) word() (token, error) {
	if p.i >= len(p.toks) {
		return token{}, fmt.Errorf("expression ends too early")
	}
	t := p.toks[p.i]
	if t.op {
		return token{}, fmt.Errorf("unexpected %q at character %d", t.text, t.at+1)
	}
	p.i++
	return t, nil
}

// isRef reports whether a token names a knob or variable.
func isRef(t token) bool {
	if t.quoted {
		return false
	}
	if _, ok := exprVars[t.text]; ok {
		return true
	}
	_, ok := knobs.Lookup(t.text)
	return ok
}

func isNumeric(name string) bool {
	if num, ok := exprVars[name]; ok {
		return num
	}
	k, _ := knobs.Lookup(name)
	return k != nil && (k.Type == knobs.Int || k.Type == knobs.Float || k.Type == knobs.Size)
}

func comparison(op string, lt, rt token) (exprNode, error) {
	lr, rr := isRef(lt), isRef(rt)
	if !lr && !rr {
		return nil, fmt.Errorf("neither %q nor %q is a knob or a variable (%s)%s", lt.text, rt.text,
			"ranks, dp, gpus, nodes, device, family, preset", didYouMean(knobs.Suggest(lt.text)))
	}
	ordering := op != "==" && op != "!="
	mk := func(ref, other token, otherRef bool) (operand, error) {
		if ordering && !isNumeric(ref.text) {
			return operand{}, fmt.Errorf("%s is not a number: use == or != with it", ref.text)
		}
		if otherRef {
			if ordering && !isNumeric(other.text) {
				return operand{}, fmt.Errorf("%s is not a number: use == or != with it", other.text)
			}
			return operand{ref: other.text}, nil
		}
		lit, err := literalFor(ref.text, other.text)
		if err != nil {
			return operand{}, err
		}
		return operand{lit: lit, auto: lit == knobs.Auto}, nil
	}
	var l, r operand
	var err error
	if lr {
		l = operand{ref: lt.text}
		r, err = mk(lt, rt, rr)
	} else {
		r = operand{ref: rt.text}
		l, err = mk(rt, lt, lr)
	}
	if err != nil {
		return nil, err
	}
	return cmpNode{op: op, l: l, r: r}, nil
}

// literalFor canonicalises a literal compared with the knob or variable ref.
func literalFor(ref, lit string) (string, error) {
	if k, ok := knobs.Lookup(ref); ok {
		v, err := k.Canonical(lit)
		if err != nil {
			return "", err
		}
		return v, nil
	}
	switch ref {
	case "device":
		if !contains([]string{"auto", "cuda", "cpu"}, lit) {
			return "", fmt.Errorf("device: %q is not one of auto | cuda | cpu", lit)
		}
	case "family":
		if !contains(Families, lit) {
			return "", fmt.Errorf("family: %q is not one of %s", lit, strings.Join(Families, " | "))
		}
	case "preset":
	default: // numeric variables
		n, err := strconv.Atoi(lit)
		if err != nil {
			return "", fmt.Errorf("%s: %q is not an integer", ref, lit)
		}
		return strconv.Itoa(n), nil
	}
	return lit, nil
}
