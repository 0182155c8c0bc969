package main

import (
	"fmt"
	"io"
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
	fmt.Fprint(stderr, `usage: aerie zap pub|view [flags]   (aerie zap pub -h, aerie zap view -h)

The ZapViewers application of P2S (DEBS 2014 §3.3): TV viewer statistics
from the channel changes of IPTV set-top boxes.

  pub    publish channel-change and status events as set-top boxes would,
         from a seeded model of zapping (docs in internal/zap)
  view   a durable subscriber computing viewers per channel and the top-N
         channels continuously; its state survives a restart exactly
`)
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		return 0
	}
	return 2
}
