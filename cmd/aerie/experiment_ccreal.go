package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/aerie-mq/aerie/internal/lab/ccexp"
	"github.com/aerie-mq/aerie/internal/lab/ccreal"
)

// ccRealPlots: Gryphon CC, Middleware 2003 §5 E1 and E2 with real broker
// processes (internal/lab/ccreal), and the plot each case draws.
var ccRealPlots = map[string]string{"cc-e1-real": "cc-e1-real.png", "cc-e2-real": "cc-e2-real.png", "cc-e2-real-proxy": "cc-e2-real-proxy.png"}

func isCCRealCase(c string) bool { return ccRealPlots[c] != "" }

// runCCRealCase runs E1 (with and without congestion control) or E2 with
// bin as the brokers, in a working directory under dir (a fresh temporary
// one when dir is empty), plots it to out and prints its summary.
func runCCRealCase(ctx context.Context, c, bin, out, dir string, stdout, stderr io.Writer) error {
	work, err := workDir(dir, c)
	if err != nil {
		return err
	}
	png := filepath.Join(out, ccRealPlots[c])
	run := func(o ccreal.Options) (*ccreal.Result, error) {
		o.Progress = stderr
		res, err := ccreal.Run(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o, err)
		}
		fmt.Fprint(stdout, res.Summary())
		// Every series, for figures the summary does not give.
		if b, err := json.Marshal(res); err == nil {
			os.WriteFile(filepath.Join(o.Dir, "result.json"), b, 0o644)
		}
		return res, nil
	}
	switch c {
	case "cc-e1-real":
		cc, err := run(ccreal.E1Options(bin, filepath.Join(work, "cc"), true))
		if err != nil {
			return err
		}
		nocc, err := run(ccreal.E1Options(bin, filepath.Join(work, "nocc"), false))
		if err != nil {
			return err
		}
		err = ccexp.PlotE1Real(cc, nocc, png)
		if err != nil {
			return err
		}
	default:
		res, err := run(ccreal.E2Options(bin, filepath.Join(work, "cc"), c == "cc-e2-real-proxy"))
		if err != nil {
			return err
		}
		if err := ccexp.PlotE2Real(res, png); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "  plot: %s (broker logs in %s)\n", png, work)
	return nil
}

// workDir is dir/c, or a fresh temporary directory when dir is empty.
func workDir(dir, c string) (string, error) {
	if dir == "" {
		w, err := os.MkdirTemp("", "aerie-experiment-"+c+"-")
		if err != nil {
			return "", fmt.Errorf("work directory: %w", err)
		}
		return w, nil
	}
	w := filepath.Join(dir, c)
	if err := os.MkdirAll(w, 0o755); err != nil {
		return "", fmt.Errorf("work directory: %w", err)
	}
	return w, nil
}
