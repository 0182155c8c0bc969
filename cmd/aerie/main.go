// Command aerie is the single binary of the aerie broker network: brokers,
// a local development network, clients, the deterministic simulator and the
// benchmark harness, as subcommands.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/aerie-mq/aerie/internal/bench"
)

// command is one subcommand of aerie: the registry (commands) drives
// dispatch, `aerie -h` and `aerie help CMD`.
type command struct {
	name    string
	group   string // the heading it is listed under by `aerie -h`
	summary string // one line
	run     func(args []string, stdout, stderr io.Writer) int
	hidden  bool // started by aerie itself: not listed
}

// The groups of `aerie -h`, in order.
var commandGroups = []string{"run a network", "publish and subscribe", "check and measure", "about aerie"}

// commands is every subcommand, in the order `aerie -h` lists them.
func commands() []command {
	return []command{
		{"dev", "run a network", "a local network in one process (PHB, IB, two SHBs) with a dashboard", runDev, false},
		{"broker", "run a network", "one broker of a network, as its own process", runBroker, false},
		{"certs", "run a network", "a development CA and the TLS certificates of a network", runCerts, false},
		{"passwd", "run a network", "the bcrypt hash of a password read from stdin, for a [[user]]", runPasswd, false},
		{"pub", "publish and subscribe", "publish events and wait until each is durable", runPub, false},
		{"sub", "publish and subscribe", "subscribe to a topic pattern and selector, print each event", runSub, false},
		{"zap", "publish and subscribe", "ZapViewers of P2S: set-top box events (zap pub), viewers per channel (zap view)", runZap, false},
		{"sim", "check and measure", "seeded deterministic simulations of whole networks under faults", runSim, false},
		{"chaos", "check and measure", "a network of broker processes killed, stalled and cut; every delivery checked", runChaos, false},
		{"bench", "check and measure", "benchmark workloads, side by side with NATS", runBench, false},
		{"experiment", "check and measure", "reproduce the experiments of the papers, with plots", runExperiment, false},
		{"version", "about aerie", "the version of aerie and of Go", runVersion, false},
		{"help", "about aerie", "this list, or the description, examples and flags of a command", runHelp, false},
		{bench.ChildCommand, "", "one broker or subscriber set of `aerie bench --procs`", runBenchChild, true},
	}
}

// lookup finds a command by name, hidden ones included.
func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stderr)
		return 0
	case "-version", "--version":
		return runVersion(args[1:], stdout, stderr)
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "aerie: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}

// runHelp implements `aerie help [CMD]`: `aerie help pub` is `aerie pub -h`.
func runHelp(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		usage(stderr)
		return 0
	case len(args) > 1:
		fmt.Fprintf(stderr, "aerie help: one command at a time, not %q\n", args)
		return 2
	case args[0] == "help", args[0] == "-h", args[0] == "--help":
		usage(stderr)
		return 0
	}
	c, ok := lookup(args[0])
	if !ok || c.hidden {
		fmt.Fprintf(stderr, "aerie help: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	c.run([]string{"-h"}, stdout, stderr)
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: aerie COMMAND [flags]")
	fmt.Fprintln(w, "\naerie is a reliable, content-based publish/subscribe broker network: every event delivered")
	fmt.Fprintln(w, "exactly once, in order per publishing endpoint, across brokers that filter by content at every hop.")
	cmds := commands()
	for _, g := range commandGroups {
		fmt.Fprintf(w, "\n%s:\n", g)
		for _, c := range cmds {
			if c.group == g && !c.hidden {
				fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
			}
		}
	}
	fmt.Fprintln(w, "\n`aerie help COMMAND` (or `aerie COMMAND -h`) describes a command, with examples and its flags.")
	fmt.Fprintln(w, "Try it: `aerie dev` prints the two commands to run in another terminal.")
}
