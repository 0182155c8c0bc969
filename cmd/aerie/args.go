package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// parseFlags parses args into fs and refuses what is left over: Go's flag
// package stops at the first argument that is not a flag, so a positional
// argument would silently drop every flag after it. ok is false when the
// command must exit with code (0 after -h, 2 for a usage error, already
// reported on fs's output).
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if err := noPositional(fs); err != nil {
		fmt.Fprintf(fs.Output(), "%s: %v\n", fs.Name(), err)
		return 2, false
	}
	return 0, true
}

// noPositional refuses arguments left after the flags, naming them.
func noPositional(fs *flag.FlagSet) error {
	if fs.NArg() == 0 {
		return nil
	}
	quoted := make([]string, fs.NArg())
	for i, a := range fs.Args() {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	what := "argument " + quoted[0]
	if len(quoted) > 1 {
		what = "arguments " + strings.Join(quoted, " ")
	}
	hint := "this command takes flags only"
	if fs.Lookup("topic") != nil {
		hint += fmt.Sprintf(" (a topic is given as --topic %s)", fs.Arg(0))
	}
	return fmt.Errorf("unexpected %s: %s, and flags after an argument would not be read", what, hint)
}

// Checks of numeric flags: each names the flag, the value and the rule.

func atLeast(name string, v, least int) error {
	if v < least {
		return fmt.Errorf("--%s %d: must be at least %d", name, v, least)
	}
	return nil
}

func within(name string, v, least, most int, why string) error {
	if v < least || v > most {
		return fmt.Errorf("--%s %d: must be from %d to %d (%s)", name, v, least, most, why)
	}
	return nil
}

func nonNegativeFloat(name string, v float64, zero string) error {
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("--%s %v: must be a finite number, 0 or more (0: %s)", name, v, zero)
	}
	return nil
}

func nonNegativeDuration(name string, d time.Duration, zero string) error {
	if d < 0 {
		return fmt.Errorf("--%s %v: must be 0 or more (0: %s)", name, d, zero)
	}
	return nil
}

func positiveDuration(name string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("--%s %v: must be more than 0", name, d)
	}
	return nil
}

// someAddress refuses a --connect list without an address.
func someAddress(addrs string) error {
	for a := range strings.SplitSeq(addrs, ",") {
		if strings.TrimSpace(a) != "" {
			return nil
		}
	}
	return fmt.Errorf("--connect %q: no address; give HOST:PORT, or several separated by commas", addrs)
}

// firstErr is the first of errs that is not nil.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// usageWith makes fs's -h output a description and examples before the
// flags, as the nats CLI shows them.
func usageWith(fs *flag.FlagSet, synopsis, description string, examples ...string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: %s\n\n", synopsis)
		writeWrapped(w, description, 78)
		if len(examples) > 0 {
			fmt.Fprintln(w, "\nexamples:")
			for _, e := range examples {
				fmt.Fprintf(w, "  %s\n", e)
			}
		}
		printFlags(fs)
	}
}

// printFlags writes fs's flags as flag.PrintDefaults does, under a
// heading, leaving out the hidden ones.
func printFlags(fs *flag.FlagSet) {
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(fs.Output())
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := f.Value.(hiddenValue); ok {
			return
		}
		shown.Var(f.Value, f.Name, f.Usage)
		shown.Lookup(f.Name).DefValue = f.DefValue
	})
	n := 0
	shown.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(fs.Output(), "\nflags:")
		shown.PrintDefaults()
	}
}

// hiddenValue is the value of a flag that -h does not show: a diagnosis
// flag, or the former name of a renamed flag.
type hiddenValue struct{ flag.Value }

// IsBoolFlag lets a hidden bool flag go without a value, as any bool flag.
func (h hiddenValue) IsBoolFlag() bool {
	b, ok := h.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// hide keeps flag name working but out of -h.
func hide(fs *flag.FlagSet, name string) {
	f := fs.Lookup(name)
	f.Value = hiddenValue{f.Value}
}

// formerName keeps old working as another name of flag name, out of -h:
// a renamed flag keeps its old name (docs/CONFIG.md "Command-line flags").
func formerName(fs *flag.FlagSet, old, name string) {
	f := fs.Lookup(name)
	fs.Var(hiddenValue{f.Value}, old, "former name of --"+name)
}

// writeWrapped writes text as lines of at most width characters.
func writeWrapped(w io.Writer, text string, width int) {
	line := 0
	for i, word := range strings.Fields(text) {
		if i > 0 && line+1+len(word) > width {
			fmt.Fprintln(w)
			line = 0
		} else if i > 0 {
			fmt.Fprint(w, " ")
			line++
		}
		fmt.Fprint(w, word)
		line += len(word)
	}
	fmt.Fprintln(w)
}
