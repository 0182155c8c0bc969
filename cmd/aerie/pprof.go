package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
)

// pprofEnv names an address on which a broker process serves Go's
// profiles (net/http/pprof: /debug/pprof/heap, /debug/pprof/profile, …),
// apart from its operations endpoint: a knob for the deploy/soak scripts
// (restart.sh reads a PHB's heap with it), never on in a deployment.
const pprofEnv = "AERIE_PPROF"

// servePprof serves the profiles on $AERIE_PPROF when it is set.
func servePprof() error {
	addr := os.Getenv(pprofEnv)
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", pprofEnv, addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { _ = http.Serve(ln, mux) }()
	return nil
}
