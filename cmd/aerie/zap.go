package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// runZap implements `aerie zap pub|view`: the ZapViewers application of
// P2S (DEBS 2014 §3.3) on an aerie network (internal/zap).
func runZap(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "pub":
			return runZapPub(args[1:], stdout, stderr)
		case "view":
			return runZapView(args[1:], stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("aerie zap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	usageWith(fs, "aerie zap pub|view [flags]",
		"The ZapViewers application of P2S (DEBS 2014 §3.3): TV viewer statistics from the channel changes of "+
			"IPTV set-top boxes. zap pub publishes the channel-change and status events of many boxes from a seeded "+
			"model of zapping (the package doc of internal/zap); zap view is a durable subscriber that counts the "+
			"viewers of every channel and reports the top ones continuously, its state exact across restarts. "+
			"aerie zap pub -h and aerie zap view -h describe their flags.",
		"aerie zap pub --connect 127.0.0.1:7201 --boxes 10000 --rate 1000 --duration 1m",
		"aerie zap view --connect 127.0.0.1:7203 --top 5 --checkpoint zap.state")
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "aerie zap: unknown subcommand %q: pub or view\n", args[0])
		return 2
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	fs.Usage()
	return 2
}
