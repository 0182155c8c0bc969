package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// runVersion implements `aerie version` (and `aerie --version`): the
// module version the binary was built from ("(devel)" for a build from a
// checkout, then the commit and its date when the build recorded them,
// "+modified" for uncommitted changes) and the Go version and platform.
func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aerie version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	usageWith(fs, "aerie version",
		"Print the version of aerie: the module version the binary was built from, or \"(devel)\" for a build from "+
			"a checkout followed by the commit and its date when the build recorded them (and \"+modified\" for "+
			"uncommitted changes), then the Go version and the platform. `aerie --version` is the same.",
		"aerie version",
		"go run ./cmd/aerie version")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	fmt.Fprintf(stdout, "aerie %s %s %s/%s\n", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}

func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	return versionOf(bi)
}

// versionOf is the version a build info records: the module's, then the
// commit (12 hex digits) and its date when the build stamped them (go
// build does in a git checkout unless -buildvcs=false).
func versionOf(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if len(rev) >= 12 {
		v += " " + rev[:12]
		if at != "" {
			v += " " + at
		}
		if modified == "true" {
			v += " +modified"
		}
	}
	return v
}
