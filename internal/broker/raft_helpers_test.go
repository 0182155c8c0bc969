package broker_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
)

// memLog keeps a broker's log from INFO up (level, message and
// attributes), for tests that look for a warning and for the account of a
// failed test (startRaftCellLogged prints them then).
type memLog struct {
	mu   *sync.Mutex
	msgs *[]string
}

func newMemLog() memLog { return memLog{mu: &sync.Mutex{}, msgs: new([]string)} }

func (w memLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (w memLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Time.Format("15:04:05.000 ") + r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	*w.msgs = append(*w.msgs, b.String())
	return nil
}

// all returns the messages so far.
func (w memLog) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), *w.msgs...)
}
func (w memLog) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w memLog) WithGroup(string) slog.Handler      { return w }

// has returns the first message containing every one of parts ("": none).
func (w memLog) has(parts ...string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
next:
	for _, m := range *w.msgs {
		for _, p := range parts {
			if !strings.Contains(m, p) {
				continue next
			}
		}
		return m
	}
	return ""
}

// startRaftCellLogged is startRaftCell with forwarding, keeping each
// member's warnings and errors: logs[i] is member p<i+1>'s.
func startRaftCellLogged(t testing.TB, ctx context.Context, k int, mods ...func(*broker.RaftOptions)) (*raftCell, []memLog) {
	logs := make([]memLog, k)
	i := 0
	c := startRaftCellWith(t, ctx, k, broker.RaftClientsForward, func(o *broker.Options) {
		logs[i] = newMemLog()
		o.Logger = slog.New(logs[i])
		i++
	}, mods...)
	t.Cleanup(func() {
		if t.Failed() {
			for i, l := range logs {
				t.Logf("p%d's log:\n\t%s", i+1, strings.Join(l.all(), "\n\t"))
			}
		}
	})
	return c, logs
}

// subscribeAll connects subscriber "sub" to n, subscribes it to every
// topic and collects what it gets; the caller closes the client.
func subscribeAll(t testing.TB, ctx context.Context, n *broker.Node) (*client.Client, *collector) {
	subc, err := client.Dial(ctx, n.ClientAddr(), client.Options{ID: "sub", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := subc.Subscribe(ctx, ">")
	if err != nil {
		subc.Close()
		t.Fatal(err)
	}
	return subc, collect(t, sub)
}

// dialPub connects publisher "pub" of P1 to member.
func dialPub(t testing.TB, ctx context.Context, member *broker.Node) *client.Client {
	t.Helper()
	pub, err := client.Dial(ctx, member.ClientAddr(), client.Options{ID: "pub", Pubend: "P1", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// publishSeqs publishes events 1..n (the "seq" property) on topic t
// through member as publisher "pub" of P1, each acked, and disconnects.
func publishSeqs(t testing.TB, ctx context.Context, member *broker.Node, n int) {
	pub := dialPub(t, ctx, member)
	for s := 1; s <= n; s++ {
		if _, err := pub.Publish(ctx, client.Message{Topic: "t", Props: map[string]any{"seq": int64(s)}}); err != nil {
			t.Fatal(err)
		}
	}
	pub.Close()
}

// noMemberServes fails the test if any of members serves, polling each
// one's status every 50 ms for d; lost says what two of the three
// members lost.
func noMemberServes(t testing.TB, ctx context.Context, c *raftCell, d time.Duration, lost string, members ...int) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, j := range members {
			st, err := c.nodes[j].Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Raft.Serving {
				t.Fatalf("p%d serves with two of three members' %s (Raft id %d, voters %v)", j+1, lost, st.Raft.ID, st.Raft.Voters)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// flipMiddleByte flips a bit of the middle byte of the file at path, as
// a disk's corruption would, and returns the damaged contents.
func flipMiddleByte(t testing.TB, path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x20
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}
