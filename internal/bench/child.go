package bench

import (
	"context"
	"fmt"
	"io"

	"github.com/aerie-mq/aerie/internal/lattrace"
)

// ChildCommand is the hidden aerie subcommand that runs one part of a
// separate-process bench network (Options.Procs): `aerie bench-child
// broker --spec JSON` or `aerie bench-child subs --connect ADDR`. The
// harness starts it, talks to it over stdin and stdout, and kills it.
const ChildCommand = "bench-child"

// ChildMain runs a child of a separate-process network. It returns when
// ctx ends or its stdin closes (the harness has let go of it).
func ChildMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "aerie %s: want broker or subs\n", ChildCommand)
		return 2
	}
	// The harness's latency breakdown (--stages), if on.
	err := lattrace.OpenFromEnv()
	switch {
	case err != nil:
	case args[0] == "broker":
		err = runBrokerChild(ctx, args[1:], stdin, stdout)
	case args[0] == "subs":
		err = runSubsChild(ctx, args[1:], stdin, stdout)
	default:
		err = fmt.Errorf("unknown part %q (want broker or subs)", args[0])
	}
	if err != nil {
		fmt.Fprintf(stderr, "aerie %s %s: %v\n", ChildCommand, args[0], err)
		return 1
	}
	return 0
}

// untilEOF returns a context that ends with ctx or when r reaches EOF.
func untilEOF(ctx context.Context, r io.Reader) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		io.Copy(io.Discard, r)
	}()
	return ctx, cancel
}
