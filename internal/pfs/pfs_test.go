package pfs

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// TestGolden runs the stories in testdata/ (datadriven; -rewrite updates
// them). Commands:
//
//	open segment=N         a fresh PFS with N-byte segments (default 4096)
//	match t=T subs=A,B     a match record
//	cover t=T              a cover record
//	sync                   fsync
//	read sub=S lo=A hi=B [limit=N]
//	                       one character per tick: Q matched, S silence,
//	                       ? not known yet; then the batch
//	crash [seed=N]         power loss (unsynced bytes may go), then reopen
//	release t=T            free records at or below T
//	state                  records, covered, durable covered
func TestGolden(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if !strings.HasSuffix(path, ".txt") {
			t.Skip("not a story (fuzz corpus)")
		}
		fs := vfs.NewMem()
		opts := eventlog.Options{SegmentBytes: 4096}
		p, _, err := Open(fs, "pfs", opts)
		if err != nil {
			t.Fatal(err)
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			arg := func(k string) uint64 {
				for _, a := range d.CmdArgs {
					if a.Key == k {
						v, err := strconv.ParseUint(a.Vals[0], 10, 64)
						if err != nil {
							d.Fatalf(t, "%s: %v", k, err)
						}
						return v
					}
				}
				return 0
			}
			errOr := func(err error, ok string) string {
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return ok
			}
			switch d.Cmd {
			case "open":
				p.Close()
				fs, opts = vfs.NewMem(), eventlog.Options{SegmentBytes: int64(arg("segment"))}
				if p, _, err = Open(fs, "pfs", opts); err != nil {
					d.Fatalf(t, "%v", err)
				}
				return "ok\n"
			case "match":
				var subs []SubID
				for _, a := range d.CmdArgs {
					if a.Key != "subs" {
						continue
					}
					for _, v := range strings.Split(strings.Join(a.Vals, ","), ",") {
						n, err := strconv.ParseUint(v, 10, 64)
						if err != nil {
							d.Fatalf(t, "subs: %v", err)
						}
						subs = append(subs, SubID(n))
					}
				}
				return errOr(p.Match(tick.Tick(arg("t")), subs), "ok\n")
			case "cover":
				return errOr(p.Cover(tick.Tick(arg("t"))), "ok\n")
			case "sync":
				return errOr(p.Sync(), fmt.Sprintf("durable covered %d\n", p.DurableCovered()))
			case "read":
				r := tick.Range{Lo: tick.Tick(arg("lo")), Hi: tick.Tick(arg("hi"))}
				b, err := p.Read(SubID(arg("sub")), r, int(arg("limit")))
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return fmt.Sprintf("%s\nknown %v matched %v\n", picture(b, r), b.Known, b.Matched)
			case "crash":
				// No Close: a power loss does not flush anything.
				fs.Crash(rand.New(rand.NewPCG(arg("seed"), 1)))
				var rec eventlog.Recovery
				p, rec, err = Open(fs, "pfs", opts)
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return fmt.Sprintf("reopened: %d records, covered %d, torn tail %v\n", p.Records(), p.Covered(), rec.TornTail)
			case "release":
				return errOr(p.Release(tick.Tick(arg("t"))), fmt.Sprintf("records %d\n", p.Records()))
			case "state":
				return fmt.Sprintf("records %d covered %d durable %d\n", p.Records(), p.Covered(), p.DurableCovered())
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
		p.Close()
	})
}

// picture draws r for one subscriber: Q matched, S silence, ? unknown.
func picture(b Batch, r tick.Range) string {
	var sb strings.Builder
	m := map[tick.Tick]bool{}
	for _, t := range b.Matched {
		m[t] = true
	}
	for t := r.Lo; t <= r.Hi; t++ {
		switch {
		case !b.Known.Contains(t):
			sb.WriteByte('?')
		case m[t]:
			sb.WriteByte('Q')
		default:
			sb.WriteByte('S')
		}
		if t < r.Hi {
			sb.WriteByte(' ')
		}
	}
	return sb.String()
}
