// Command aerie is the single binary of the aerie broker network: brokers,
// a local development network, clients, the deterministic simulator and the
// benchmark harness, as subcommands.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/aerie-mq/aerie/internal/bench"
)

type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

func commands() map[string]command {
	return map[string]command{
		"sim":        {"run seeded deterministic simulations of whole networks under faults", runSim},
		"dev":        {"run a small local network (PHB, IB, two SHBs) with a dashboard", runDev},
		"broker":     {"run one broker of a network: --config FILE --id ID", runBroker},
		"pub":        {"publish events: --connect ADDR --topic T --prop k=v --count N", runPub},
		"sub":        {"subscribe and print events: --connect ADDR --topic PATTERN [--json]", runSub},
		"experiment": {"reproduce the failure experiments of Gryphon GD (DSN 2002 §4.2) with real processes, with plots", runExperiment},
		"bench":      {"benchmark workloads side by side with NATS: --workload NAME --peer nats --json", runBench},
		"certs":      {"write a development CA and TLS certificates for a network: --config FILE --out DIR", runCerts},
		"passwd":     {"print the bcrypt hash of a password read from stdin, for a [[user]]", runPasswd},
		"version":    {"print the version of aerie and of Go", runVersion},
		"zap":        {"ZapViewers of P2S (DEBS 2014 §3.3): set-top box events (zap pub), viewers per channel (zap view)", runZap},
		"chaos":      {"run a network as processes, kill, stall and cut it, and check every delivery: --duration DUR --seed S", runChaos},
	}
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	switch {
	case len(args) > 0 && (args[0] == "--version" || args[0] == "-version"):
		return runVersion(args[1:], stdout, stderr)
	case len(args) == 2 && args[0] == "help" && args[1] != bench.ChildCommand:
		// `aerie help pub` is `aerie pub -h`.
		c, ok := cmds[args[1]]
		if !ok {
			fmt.Fprintf(stderr, "aerie help: unknown command %q\n", args[1])
			usage(stderr, cmds)
			return 2
		}
		c.run([]string{"-h"}, stdout, stderr)
		return 0
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == bench.ChildCommand { // hidden: started by `aerie bench --procs`
		return runBenchChild(args[1:], stdout, stderr)
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "aerie: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}

func usage(w io.Writer, cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: aerie <command> [flags]   (aerie help <command>, or aerie <command> -h, for its flags)")
	fmt.Fprintln(w, "\ncommands:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
}

func notYet(name string) func([]string, io.Writer, io.Writer) int {
	return func(args []string, _, stderr io.Writer) int {
		fmt.Fprintf(stderr, "aerie %s: not built yet — %s\n", name, strings.TrimSpace(commands()[name].summary))
		return 2
	}
}
