package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// boundedDuration is a duration flag that refuses values outside [min, max]
// as it parses them, so `--kill-grace -5s` is a usage error (exit status 2)
// naming the flag and its range rather than a value changed behind the
// user's back.
type boundedDuration struct {
	v        *time.Duration
	min, max time.Duration
}

// durationVar defines a bounded duration flag.
func durationVar(f *pflag.FlagSet, p *time.Duration, name string, def, min, max time.Duration, usage string) {
	*p = def
	f.Var(&boundedDuration{v: p, min: min, max: max}, name, fmt.Sprintf("%s (%s to %s)", usage, min, max))
	f.Lookup(name).DefValue = def.String()
}

func (d *boundedDuration) String() string {
	if d.v == nil {
		return ""
	}
	return d.v.String()
}

func (d *boundedDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration: give a number with a unit, like 5s, 500ms or 2m")
	}
	if v < d.min || v > d.max {
		return fmt.Errorf("out of range: give %s to %s", d.min, d.max)
	}
	*d.v = v
	return nil
}

func (d *boundedDuration) Type() string { return "duration" }

// unsetInt is a flag for a count that may be left unset (-1): its help shows no
// default, and it takes whole numbers from 0 up.
type unsetInt struct{ v *int }

func (u unsetInt) String() string {
	if u.v == nil || *u.v < 0 {
		return ""
	}
	return strconv.Itoa(*u.v)
}

func (u unsetInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("want a whole number, 0 or more")
	}
	*u.v = n
	return nil
}

func (u unsetInt) Type() string { return "int" }
