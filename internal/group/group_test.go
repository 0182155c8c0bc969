package group

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// TestDispatcher runs the stories in testdata/*.txt. Commands:
//
//	new [max=N] [window=N] [from=P:T,...]   a dispatcher (Config)
//	join ID... / leave ID...     members come and go
//	event P@T...                 events of the group's subscription
//	progress P@T                 nothing more matched up to T
//	start P:T,...                the subscription is in force from a token
//	ack ID P@T...                member ID acknowledges events
//	drop                         the waiting events are dropped (a backlog)
//
// Each prints the deliveries made, then the state.
func TestDispatcher(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var d *Dispatcher
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			var b strings.Builder
			fields := strings.Fields(td.FullCmd())[1:]
			switch td.Cmd {
			case "new":
				var cfg Config
				from := msg.Token(nil)
				for _, f := range fields {
					k, v, _ := strings.Cut(f, "=")
					switch k {
					case "max":
						cfg.MaxUnacked, _ = strconv.Atoi(v)
					case "window":
						cfg.Window, _ = strconv.Atoi(v)
					case "from":
						tok, err := msg.ParseToken(v)
						if err != nil {
							t.Fatalf("%s: %v", td.Pos, err)
						}
						from = tok
					}
				}
				d = New(cfg, from)
			case "join":
				for _, f := range fields {
					d.Join(MemberID(f))
				}
			case "leave":
				for _, f := range fields {
					d.Leave(MemberID(f))
				}
			case "event":
				for _, f := range fields {
					p, tk := at(t, td, f)
					d.Event(&msg.Event{Pubend: p, Tick: tk, Topic: "t"})
				}
			case "progress":
				for _, f := range fields {
					p, tk := at(t, td, f)
					d.Progress(p, tk)
				}
			case "start":
				tok, err := msg.ParseToken(fields[0])
				if err != nil {
					t.Fatalf("%s: %v", td.Pos, err)
				}
				d.Start(tok)
			case "ack":
				for _, f := range fields[1:] {
					p, tk := at(t, td, f)
					if !d.Ack(MemberID(fields[0]), p, tk) {
						fmt.Fprintf(&b, "ack %s %s ignored\n", fields[0], f)
					}
				}
			case "drop":
				fmt.Fprintf(&b, "dropped %d; handed %s; room %d\n", d.DropPending(), d.Handed(), d.Room())
			default:
				t.Fatalf("%s: unknown command %s", td.Pos, td.Cmd)
			}
			for _, dl := range d.Ready() {
				again := ""
				if dl.Again {
					again = " again"
				}
				fmt.Fprintf(&b, "-> %s %s@%d%s\n", dl.To, dl.Event.Pubend, dl.Event.Tick, again)
			}
			b.WriteString(d.String())
			fmt.Fprintf(&b, "released %s\n", d.Released())
			return b.String()
		})
	})
}

// at reads P@T.
func at(t *testing.T, td *datadriven.TestData, f string) (msg.PubendID, tick.Tick) {
	p, v, ok := strings.Cut(f, "@")
	n, err := strconv.ParseUint(v, 10, 64)
	if !ok || err != nil {
		t.Fatalf("%s: %q is not P@T", td.Pos, f)
	}
	return msg.PubendID(p), tick.Tick(n)
}
