package knobs

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Canonical checks raw against the knob's domain and returns its canonical
// spelling: enum values as the registry spells them ("BF16" -> "bf16", "ring"
// -> "Ring"), booleans as "true"/"false", numbers without padding ("025" ->
// "25", "1.50" -> "1.5"), sizes in bytes ("4MiB" -> "4194304"). raw may be a
// string (a YAML scalar) or a Go bool, int or float. Trial IDs are computed
// from canonical values, so two spellings of one value are one trial.
func Canonical(name string, raw any) (string, error) {
	k, ok := Lookup(name)
	if !ok {
		if s := Suggest(name); s != "" {
			return "", fmt.Errorf("unknown knob %q (did you mean %q?)", name, s)
		}
		return "", fmt.Errorf("unknown knob %q (see 'casestudy knobs')", name)
	}
	return k.Canonical(raw)
}

// Canonical is the package function for a known knob.
func (k *Knob) Canonical(raw any) (string, error) {
	s, err := scalarString(raw)
	if err != nil {
		return "", fmt.Errorf("%s: %v", k.Name, err)
	}
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, Auto) && (k.AutoOK || k.inValues(Auto)) {
		return Auto, nil
	}
	if strings.EqualFold(s, Default) && k.DefaultOK() {
		return Default, nil
	}
	if k.OffOK {
		switch strings.ToLower(s) {
		case Off, "false", "no", "0":
			return Off, nil
		}
	}
	v, err := k.canonical(s)
	if err != nil {
		return "", fmt.Errorf("%s: %v", k.Name, err)
	}
	return v, nil
}

func (k *Knob) canonical(s string) (string, error) {
	if k.parse != nil {
		return k.parse(s)
	}
	switch k.Type {
	case Enum:
		for _, v := range k.Values {
			if strings.EqualFold(v, s) {
				return v, nil
			}
		}
		msg := fmt.Sprintf("%q is not one of %s", s, k.Domain())
		if c := Closest(s, k.Values); c != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", c)
		}
		return "", fmt.Errorf("%s", msg)
	case Bool:
		switch strings.ToLower(s) {
		case "true", "yes", "on", "1":
			return "true", nil
		case "false", "no", "off", "0":
			return "false", nil
		}
		return "", fmt.Errorf("%q is not a boolean (true | false)", s)
	case Int:
		n, err := strconv.ParseInt(s, 10, 64)
		if errors.Is(err, strconv.ErrRange) {
			return "", fmt.Errorf("%s is out of range (%s)", s, k.Domain())
		}
		if err != nil {
			return "", fmt.Errorf("%q is not an integer (%s)", s, k.Domain())
		}
		if err := k.inRange(float64(n), strconv.FormatInt(n, 10)); err != nil {
			return "", err
		}
		return strconv.FormatInt(n, 10), nil
	case Float:
		f, err := strconv.ParseFloat(s, 64)
		if err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) || errors.Is(err, strconv.ErrRange) {
			return "", fmt.Errorf("%s is not a finite number: NaN and infinity are not allowed (%s)", s, k.Domain())
		}
		if err != nil {
			return "", fmt.Errorf("%q is not a number (%s)", s, k.Domain())
		}
		if err := k.inRange(f, fmtNum(f)); err != nil {
			return "", err
		}
		return strconv.FormatFloat(f, 'g', -1, 64), nil
	case Size:
		n, err := ParseSize(s)
		if err != nil {
			return "", err
		}
		if err := k.inRange(float64(n), strconv.FormatInt(n, 10)); err != nil {
			return "", err
		}
		return strconv.FormatInt(n, 10), nil
	case String:
		if s == "" {
			return "", fmt.Errorf("empty value (use auto to leave it to the library)")
		}
		if len(s) > MaxStringValue { // it reaches the ranks as an environment variable (audit N20)
			return "", fmt.Errorf("a value of %d bytes is longer than the %d bytes an environment variable may hold on Linux", len(s), MaxStringValue)
		}
		for _, r := range s {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
				return "", fmt.Errorf("%q contains a control character", s)
			}
		}
		return s, nil
	}
	return "", fmt.Errorf("knob of unknown type %q", k.Type)
}

func (k *Knob) inValues(v string) bool {
	for _, x := range k.Values {
		if x == v {
			return true
		}
	}
	return false
}

// inRange checks f against the knob's bounds; shown is f as the message writes it.
func (k *Knob) inRange(f float64, shown string) error {
	if k.Min != "" {
		lo, _ := parseBound(k.Min)
		if f < lo {
			return fmt.Errorf("%s is below the minimum %s (%s)", shown, k.Min, k.Domain())
		}
	}
	if k.Max != "" {
		hi, _ := parseBound(k.Max)
		if f > hi {
			return fmt.Errorf("%s is above the maximum %s (%s)", shown, k.Max, k.Domain())
		}
	}
	return nil
}

func parseBound(s string) (float64, error) {
	if n, err := ParseSize(s); err == nil {
		return float64(n), nil
	}
	return strconv.ParseFloat(s, 64)
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// scalarString turns a decoded YAML scalar (or a Go value) into text.
func scalarString(raw any) (string, error) {
	switch v := raw.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int:
		return strconv.Itoa(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case uint64:
		return strconv.FormatUint(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case nil:
		return "", fmt.Errorf("missing value")
	}
	return "", fmt.Errorf("expected a single value, got %T", raw)
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1},
}

// ParseSize reads a byte count: 4194304, 4MiB, 4M (binary), 4MB (decimal), 512KiB.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size in bytes (4194304, 4MiB, 512KiB)", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}

// MaxStringValue is the longest string knob value: it reaches the ranks as
// NAME=value in their environment, and Linux refuses (E2BIG) one string over
// 128 KiB (MAX_ARG_STRLEN) at exec; 256 bytes are left for the name.
const MaxStringValue = 128<<10 - 256
