package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/wire"
)

// pair connects a Conn to a raw loopback TCP peer b that has sent its Hello
// by hand: the test then writes b's frames itself, or nothing.
func pair(t *testing.T, opts Options) (a *Conn, ra *wire.Reader, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(acc)
			return
		}
		acc <- c
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-acc
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { nc.Close(); b.Close() })
	// The raw side sends its Hello by hand and never speaks again.
	hello, err := wire.AppendFrame(nil, msg.Hello{Version: wire.Version, Role: msg.RoleBroker, ID: "b", Incarnation: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write(hello); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, ra, err = Handshake(ctx, nc, msg.Hello{Version: wire.Version, Role: msg.RoleBroker, ID: "a", Incarnation: 1}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a, ra, b
}

// TestSilentPeerIsDeclaredDead: a peer that stops sending (a stalled process
// whose socket stays open) is dropped after between 7/8 and all of DeadAfter
// of silence, even after a burst of frames that left the read deadline
// unrefreshed (Run moves it at most every DeadAfter/8).
func TestSilentPeerIsDeclaredDead(t *testing.T) {
	const dead = 400 * time.Millisecond
	a, ra, b := pair(t, Options{DeadAfter: dead, Heartbeat: time.Hour})
	// A burst of frames, then silence.
	var burst []byte
	for i := 0; i < 1000; i++ {
		var err error
		burst, err = wire.AppendFrame(burst, msg.Ack{Pubend: "P1", T: 5})
		if err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan struct{}, 1000)
	var last time.Time
	done := make(chan error, 1)
	go func() {
		done <- a.Run(context.Background(), ra, func(m msg.Msg) {
			last = time.Now()
			got <- struct{}{}
		})
	}()
	if _, err := b.Write(burst); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		<-got
	}
	select {
	case err := <-done:
		silent := time.Since(last)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Run ended with %v, want a read deadline", err)
		}
		if silent < dead*7/8 {
			t.Fatalf("declared dead after %v of silence, want at least %v", silent, dead*7/8)
		}
	case <-time.After(10 * dead):
		t.Fatalf("a peer silent for %v is still alive (DeadAfter %v)", 10*dead, dead)
	}
}

// TestHeartbeatsKeepAnIdleLinkAlive: an idle link whose peer heartbeats
// stays up for many DeadAfter periods.
func TestHeartbeatsKeepAnIdleLinkAlive(t *testing.T) {
	// A deadline long enough that a loaded machine's scheduling delays
	// (hundreds of milliseconds at a load average of 40 on two cores) do
	// not pass for a dead peer.
	const dead = time.Second
	a, ra, b := pair(t, Options{DeadAfter: dead, Heartbeat: time.Hour})
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background(), ra, func(msg.Msg) {}) }()
	hb, err := wire.AppendFrame(nil, msg.Heartbeat{})
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(dead / 4)
	defer tick.Stop()
	for i := 0; i < 12; i++ { // 3 × DeadAfter
		select {
		case err := <-done:
			t.Fatalf("link dropped after %d heartbeats: %v", i, err)
		case <-tick.C:
			if _, err := b.Write(hb); err != nil {
				t.Fatal(err)
			}
		}
	}
	a.Close()
	<-done
}

// TestSlowReaderKeepsItsLink: an application that holds the reader (a
// subscriber that stops reading for a while) must not make the link look
// dead once it reads again, even when part of the next frame was read
// ahead: the deadline is moved before the read that completes the frame.
func TestSlowReaderKeepsItsLink(t *testing.T) {
	const dead = 200 * time.Millisecond
	a, ra, b := pair(t, Options{DeadAfter: dead, Heartbeat: time.Hour})
	frames, err := wire.AppendFrame(nil, msg.Ack{Pubend: "P1", T: 5})
	if err != nil {
		t.Fatal(err)
	}
	// Larger than the reader's 64 KiB buffer: read ahead in part only.
	big := msg.Summary{Patterns: []string{strings.Repeat("a", 200<<10)}}
	if frames, err = wire.AppendFrame(frames, big); err != nil {
		t.Fatal(err)
	}
	got := make(chan msg.Msg, 2)
	done := make(chan error, 1)
	go func() {
		done <- a.Run(context.Background(), ra, func(m msg.Msg) {
			if _, first := m.(msg.Ack); first {
				time.Sleep(3 * dead) // the application does not read meanwhile
			}
			got <- m
		})
	}()
	go b.Write(frames)
	for i := 0; i < 2; i++ {
		select {
		case m := <-got:
			if s, ok := m.(msg.Summary); ok && len(s.Patterns[0]) != 200<<10 {
				t.Fatalf("summary of %d bytes", len(s.Patterns[0]))
			}
		case err := <-done:
			t.Fatalf("the link died after the reader was held for %v: %v", 3*dead, err)
		}
	}
	a.Close()
	<-done
}

// A congestion query or alert queued behind data is written first (Gryphon
// CC §3.1: they are high-priority and must not wait behind a backlog).
func TestControlMessagesJumpTheQueue(t *testing.T) {
	a, ra, b := pair(t, Options{Heartbeat: time.Hour})
	for i := range 3 {
		if !a.Send(msg.Ack{Pubend: "P1", T: tick.Tick(i + 1)}) {
			t.Fatal("send refused")
		}
	}
	if !a.Send(msg.DCQ{Pubend: "P1", Seq: 7, Position: 9}) {
		t.Fatal("send refused")
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background(), ra, func(msg.Msg) {}) }()
	r := wire.NewReader(b, 0)
	if m, err := r.Next(); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(msg.Hello); !ok {
		t.Fatalf("first frame %v, want a's Hello", m)
	}
	var got []string
	for range 4 {
		m, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%T", m))
	}
	if got[0] != "msg.DCQ" || got[1] != "msg.Ack" {
		t.Fatalf("frames in order %v, want the DCQ first", got)
	}
	a.Close()
	<-done
}

// On a paced link the writer takes a whole backlog as one batch and needs
// seconds for it; a DCQ queued meanwhile still goes out within a chunk or
// two, not after the backlog (Gryphon CC §3.1).
func TestControlMessagesJumpAPacedBacklog(t *testing.T) {
	// 40 KB/s: chunks of 4 KiB, about 100 ms each; 100 events of 1 KB
	// take 2.5 s.
	a, ra, b := pair(t, Options{Heartbeat: time.Hour, Bandwidth: 40_000})
	const n = 100
	for i := range n {
		ev := &msg.Event{Pubend: "P1", Tick: tick.Tick(i + 1), Publisher: "p", Seq: uint64(i + 1), Topic: "t", Payload: make([]byte, 1000)}
		if !a.Send(msg.Knowledge{Pubend: "P1", Start: ev.Tick, End: ev.Tick, Event: ev}) {
			t.Fatal("send refused")
		}
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background(), ra, func(msg.Msg) {}) }()
	r := wire.NewReader(b, 0)
	if m, err := r.Next(); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(msg.Hello); !ok {
		t.Fatalf("first frame %v, want a's Hello", m)
	}
	// The first event read means the writer holds the whole backlog.
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if !a.Send(msg.DCQ{Pubend: "P1", Seq: 7, Position: 9}) {
		t.Fatal("send refused")
	}
	events := 1
	for {
		m, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := m.(msg.DCQ); ok {
			break
		}
		events++
	}
	// Two chunks of 4 KiB hold at most 8 events, plus the first one.
	if events > 10 {
		t.Fatalf("the DCQ came after %d of the %d events, want within two chunks", events, n)
	}
	a.Close()
	<-done
}

// The pacer holds writes to the bandwidth: 10 KB at 100 KB/s books 100 ms,
// so the next write waits for what is left of it; idle time is not saved.
func TestPacerSpacesWrites(t *testing.T) {
	var p pacer
	t0 := time.Unix(1000, 0)
	if d := p.wait(t0, 10_000, 100_000); d != 0 {
		t.Fatalf("first write waits %v", d)
	}
	if d := p.wait(t0.Add(30*time.Millisecond), 10_000, 100_000); d != 70*time.Millisecond {
		t.Fatalf("second write waits %v, want 70ms", d)
	}
	// Booked up to t0+200ms; a write at t0+1s (after idling) goes at once
	// and books only its own 100 ms.
	if d := p.wait(t0.Add(time.Second), 10_000, 100_000); d != 0 {
		t.Fatalf("write after idling waits %v", d)
	}
	if d := p.wait(t0.Add(time.Second), 1, 100_000); d != 100*time.Millisecond {
		t.Fatalf("next write waits %v, want 100ms", d)
	}
	// Slept 10 ms too long (booked up to t0+1.1s and 10 µs, the byte
	// above): the late write keeps
	// its slot, so the one after it waits the full 100 ms from the slot.
	late := t0.Add(1110 * time.Millisecond)
	if d := p.wait(late, 10_000, 100_000); d != 0 {
		t.Fatalf("late write waits %v", d)
	}
	if d := p.wait(late, 1, 100_000); d != 90*time.Millisecond+10*time.Microsecond {
		t.Fatalf("write after a late one waits %v, want 90.01ms (the oversleep made up)", d)
	}
}

// RunBatch hands over the frames one read brought in as one burst, in
// order and at most MaxBatch at a time, and does not hold a burst back
// waiting for the rest of a frame that is only partly there.
func TestRunBatchDeliversBurstsInOrder(t *testing.T) {
	a, ra, b := pair(t, Options{})
	var stream []byte
	const n = 150
	for i := range n {
		var err error
		if stream, err = wire.AppendFrame(stream, msg.Nack{Pubend: "P1", Start: tick.Tick(i), End: tick.Tick(i)}); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan []msg.Msg, n)
	go a.RunBatch(context.Background(), ra, func(ms []msg.Msg) []msg.Msg {
		got <- append([]msg.Msg(nil), ms...)
		return ms[:0]
	})
	one := len(stream) / n
	// All but half of the last frame in one write.
	if _, err := b.Write(stream[:len(stream)-one/2]); err != nil {
		t.Fatal(err)
	}
	next, bursts, biggest := 0, 0, 0
	timeout := time.After(5 * time.Second)
	for next < n-1 {
		select {
		case ms := <-got:
			bursts++
			biggest = max(biggest, len(ms))
			if len(ms) > MaxBatch {
				t.Fatalf("burst of %d, over MaxBatch %d", len(ms), MaxBatch)
			}
			for _, m := range ms {
				if s := m.(msg.Nack).Start; s != tick.Tick(next) {
					t.Fatalf("got Nack %d, want %d", s, next)
				}
				next++
			}
		case <-timeout:
			t.Fatalf("only %d of the %d whole frames delivered while the last one is incomplete", next, n-1)
		}
	}
	if biggest < 2 {
		t.Errorf("%d frames written at once came in %d bursts of at most %d", n-1, bursts, biggest)
	}
	if _, err := b.Write(stream[len(stream)-one/2:]); err != nil {
		t.Fatal(err)
	}
	select {
	case ms := <-got:
		if len(ms) != 1 || ms[0].(msg.Nack).Start != n-1 {
			t.Fatalf("last burst %v", ms)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("last frame not delivered once complete")
	}
	a.Close()
}

// TestOnlyAnIdleSideHeartbeats: a side that keeps writing sends no
// heartbeats (its frames say it is alive); once it stops, heartbeats come.
func TestOnlyAnIdleSideHeartbeats(t *testing.T) {
	const interval = 100 * time.Millisecond
	a, ra, b := pair(t, Options{Heartbeat: interval, DeadAfter: time.Minute})
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background(), ra, func(msg.Msg) {}) }()
	defer func() { a.Close(); <-done }()
	var mu sync.Mutex
	var heartbeats, acks int
	go func() {
		r := wire.NewReader(b, 0)
		for {
			m, err := r.Next()
			if err != nil {
				return
			}
			mu.Lock()
			switch m.(type) {
			case msg.Heartbeat:
				heartbeats++
			case msg.Ack:
				acks++
			}
			mu.Unlock()
		}
	}()
	count := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return heartbeats, acks
	}
	// Busy for 20 intervals: a frame every quarter of an interval.
	tk := time.NewTicker(interval / 4)
	for i := 0; i < 80; i++ {
		<-tk.C
		a.Send(msg.Ack{Pubend: "P1", T: tick.Tick(i)})
	}
	tk.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for _, acked := count(); acked < 80; _, acked = count() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 80 frames arrived", acked)
		}
		time.Sleep(time.Millisecond)
	}
	// Before, a busy side heartbeated whenever its queue was empty at a
	// tick (about 20 times here); a scheduling stall of an interval may
	// let one or two through.
	if hb, _ := count(); hb > 3 {
		t.Errorf("%d heartbeats while the side wrote every %v (interval %v)", hb, interval/4, interval)
	}
	busy, _ := count()
	for hb, _ := count(); hb < busy+3; hb, _ = count() {
		if time.Now().After(deadline) {
			t.Fatalf("an idle side sent %d heartbeats in 10 s (interval %v)", hb-busy, interval)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSetBandwidthWhileRunning lifts a cap while the writer works through
// a paced backlog (an operator's config reload, Gryphon CC §5 E2): the rest
// goes out unpaced at once instead of at the old cap.
func TestSetBandwidthWhileRunning(t *testing.T) {
	// 40 KB/s: 100 events of 1 KB would take 2.5 s.
	a, ra, b := pair(t, Options{Heartbeat: time.Hour, Bandwidth: 40_000})
	const n = 100
	for i := range n {
		ev := &msg.Event{Pubend: "P1", Tick: tick.Tick(i + 1), Publisher: "p", Seq: uint64(i + 1), Topic: "t", Payload: make([]byte, 1000)}
		if !a.Send(msg.Knowledge{Pubend: "P1", Start: ev.Tick, End: ev.Tick, Event: ev}) {
			t.Fatal("send refused")
		}
	}
	go a.Run(context.Background(), ra, func(msg.Msg) {})
	r := wire.NewReader(b, 0)
	for range 2 { // a's Hello, then the first event: the writer holds the backlog
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	a.SetBandwidth(0)
	for range n - 1 {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	// One paced chunk (about 100 ms) may already be booked; the rest
	// would take 2.4 s at the old cap.
	if d := time.Since(began); d > time.Second {
		t.Fatalf("the backlog took %v after the cap was lifted, want well under the 2.4 s of the old cap", d)
	}
}

// A run (KnowledgeRun between brokers, DeliveryRun to a client) counts in
// the queue as the frames it stands for, one per event: a peer that reads
// too slowly is closed after as many events as when each came in a frame
// of its own.
func TestQueueCountsRunsByEvents(t *testing.T) {
	evs := make([]*msg.Event, 6)
	for i := range evs {
		evs[i] = &msg.Event{Pubend: "P", Tick: tick.Tick(1 + i)}
	}
	for _, c := range []struct {
		role msg.Role
		run  msg.Msg
	}{
		{msg.RoleBroker, &msg.KnowledgeRun{Pubend: "P", Start: 1, End: 6, Events: evs}},
		{msg.RoleClient, &msg.DeliveryRun{Sub: "s", Events: evs}},
	} {
		t.Run(fmt.Sprintf("%T", c.run), func(t *testing.T) {
			a, b := net.Pipe()
			defer b.Close()
			conn := newConn(a, msg.Hello{Version: wire.Version, Role: c.role, ID: "p"}, Options{QueueFrames: 10})
			if !conn.Send(c.run) || !conn.Send(c.run) {
				t.Fatal("a queue of 10 frames refused the first 6 or 12 events")
			}
			if conn.Send(msg.Heartbeat{}) {
				t.Fatal("a queue of 10 frames took a frame after 12 events")
			}
			if !errors.Is(conn.Err(), ErrQueueFull) {
				t.Fatalf("closed with %v, want ErrQueueFull", conn.Err())
			}
		})
	}
}

// recordConn records what is written to it.
type recordConn struct {
	net.Conn
	out bytes.Buffer
}

func (c *recordConn) Write(b []byte) (int, error)      { return c.out.Write(b) }
func (c *recordConn) SetWriteDeadline(time.Time) error { return nil }

// The writer of a connection with PublishRuns sends the publishes it finds
// queued together as PublishRun frames of at most PublishRunMax publishes
// and about PublishRunBytesMax bytes, ending a run at any other message,
// to a peer that answered in version 13; to an older peer it sends a
// Publish frame each. Either way the peer reads the same publishes, in
// order.
func TestWriterJoinsPublishesIntoRuns(t *testing.T) {
	var batch []msg.Msg
	pub := func(seq int, payload int) *msg.Publish {
		return &msg.Publish{Pubend: "P", Publisher: "c", Seq: uint64(seq), Topic: "t", Payload: make([]byte, payload)}
	}
	seq := 0
	for range 300 { // a full run and 44 more
		seq++
		batch = append(batch, pub(seq, 1))
	}
	batch = append(batch, msg.Heartbeat{})
	seq++
	batch = append(batch, pub(seq, 1)) // alone between two other messages
	batch = append(batch, msg.Unsubscribe{Sub: "s"})
	for range 5 { // 5 of 10 KiB: three fit in 32 KiB
		seq++
		batch = append(batch, pub(seq, 10<<10))
	}
	seq++
	batch = append(batch, msg.Publish{Pubend: "P", Publisher: "c", Seq: uint64(seq), Topic: "t"}) // a resend's form
	for _, c := range []struct {
		version uint16
		frames  []string
	}{
		{wire.VersionPublishRun, []string{"PublishRun 256", "PublishRun 44", "Heartbeat", "Publish", "Unsubscribe", "PublishRun 3", "PublishRun 3"}},
		{wire.VersionPublishRun - 1, nil},
	} {
		rc := &recordConn{}
		conn := newConn(rc, msg.Hello{Version: c.version, Role: msg.RoleBroker, ID: "b"}, Options{PublishRuns: true}.withDefaults())
		conn.writeBatch(nil, batch)
		r := wire.NewReader(&rc.out, 0)
		var frames []string
		var seqs []uint64
		for {
			m, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			switch m := m.(type) {
			case *msg.PublishRun:
				if c.version < wire.VersionPublishRun {
					t.Fatalf("version %d peer sent %v", c.version, m)
				}
				frames = append(frames, fmt.Sprintf("PublishRun %d", len(m.Publishes)))
				for _, p := range m.Publishes {
					seqs = append(seqs, p.Seq)
				}
			case msg.Publish:
				frames = append(frames, "Publish")
				seqs = append(seqs, m.Seq)
			default:
				frames = append(frames, strings.TrimPrefix(fmt.Sprintf("%T", m), "msg."))
			}
		}
		if c.frames != nil && !slices.Equal(frames, c.frames) {
			t.Errorf("version %d peer: frames %v, want %v", c.version, frames, c.frames)
		}
		if c.frames == nil && len(frames) != len(batch) {
			t.Errorf("version %d peer: %d frames for %d messages", c.version, len(frames), len(batch))
		}
		for i, s := range seqs {
			if s != uint64(i+1) {
				t.Fatalf("version %d peer: publish %d is #%d", c.version, i, s)
			}
		}
		if len(seqs) != seq {
			t.Fatalf("version %d peer: %d of %d publishes", c.version, len(seqs), seq)
		}
	}
}

// A run asks for acks for all its publishes or for none: the writer ends a
// run where publishes that ask for no ack begin or end, and sends those as
// PublishRunNoAck (or PublishNoAck) frames.
func TestWriterSplitsRunsWhereNoAckChanges(t *testing.T) {
	var batch []msg.Msg
	for i, noAck := range []bool{false, false, true, true, true, false, true} {
		batch = append(batch, &msg.Publish{Pubend: "P", Publisher: "c", Seq: uint64(i + 1), Topic: "t", NoAck: noAck})
	}
	rc := &recordConn{}
	conn := newConn(rc, msg.Hello{Version: wire.VersionPublishNoAck, Role: msg.RoleBroker, ID: "b"}, Options{PublishRuns: true}.withDefaults())
	conn.writeBatch(nil, batch)
	var frames []string
	for b := rc.out.Bytes(); len(b) > 0; {
		n := int(binary.LittleEndian.Uint32(b))
		frames = append(frames, wire.Type(b[4]).String())
		m, err := wire.Decode(b[4 : 4+n])
		if err != nil {
			t.Fatal(err)
		}
		ps := []msg.Publish{}
		switch m := m.(type) {
		case *msg.PublishRun:
			ps = m.Publishes
		case msg.Publish:
			ps = append(ps, m)
		}
		for _, p := range ps {
			if want := batch[p.Seq-1].(*msg.Publish).NoAck; p.NoAck != want {
				t.Errorf("#%d read with NoAck %v, sent with %v", p.Seq, p.NoAck, want)
			}
		}
		b = b[4+n:]
	}
	want := []string{"PublishRun", "PublishRunNoAck", "Publish", "PublishNoAck"}
	if !slices.Equal(frames, want) {
		t.Errorf("frames %v, want %v", frames, want)
	}
}

// WaitRoom holds a sender while the queue is at its mark, and lets it go
// when the writer takes the queue, or at once when the queue is below the
// mark or the connection is closed; an ended context ends the wait.
func TestWaitRoom(t *testing.T) {
	a, ra, b := pair(t, Options{Heartbeat: time.Hour})
	for i := range 10 {
		a.Send(msg.Ack{Pubend: "P1", T: tick.Tick(i + 1)})
	}
	if q := a.Queued(); q != 10 {
		t.Fatalf("Queued %d, want 10", q)
	}
	if err := a.WaitRoom(context.Background(), 11); err != nil {
		t.Fatalf("WaitRoom below the mark: %v", err)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.WaitRoom(gone, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitRoom at the mark with an ended context: %v", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- a.WaitRoom(context.Background(), 5) }()
	select {
	case err := <-waited:
		t.Fatalf("WaitRoom returned %v before the writer took the queue", err)
	default:
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background(), ra, func(msg.Msg) {}) }()
	if err := <-waited; err != nil {
		t.Fatalf("WaitRoom after the writer took the queue: %v", err)
	}
	r := wire.NewReader(b, 0)
	for i := range 10 { // the ten frames reached the peer
		if _, err := r.Next(); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	a.Close()
	<-done
	if err := a.WaitRoom(context.Background(), 0); err != nil {
		t.Fatalf("WaitRoom on a closed connection: %v", err)
	}
}
