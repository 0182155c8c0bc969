package shell_test

import (
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
)

// TestDiskReserve: below its disk reserve a PHB refuses new publishes with
// the reason and logs nothing for them; once room returns it takes them
// again. Unknown room refuses nothing.
func TestDiskReserve(t *testing.T) {
	eng, err := gd.New("p1", gd.DefaultConfig(), []gd.Route{{Pubend: "P1"}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{now: 1767225600 * 1e9, clients: map[shell.ClientID][]msg.Msg{}, closed: map[shell.ClientID]string{}}
	b := shell.New(shell.Config{ID: "p1", Engine: eng, Clock: f, Net: f, Durability: f, Hosted: []msg.PubendID{"P1"},
		Strict: true, DiskReserve: 32 << 20})
	var next uint64 = 1
	b.ClientUp(1)
	b.ClientRequest(1, publish(1)) // room unknown: taken
	b.Drain()
	persistAll(t, b, f, &next)
	b.DiskRoom(8 << 20)
	b.ClientRequest(1, publish(2))
	b.Drain()
	rej := ofType[msg.PubReject](f.clients[1])
	if len(rej) != 1 || rej[0].Seq != 2 || !strings.Contains(rej[0].Reason, "8 MiB free, below its 32 MiB reserve") || len(f.appends) != 0 {
		t.Fatalf("publish below the reserve: rejects %v, appends %v", rej, f.appends)
	}
	b.DiskRoom(64 << 20)
	b.ClientRequest(1, publish(2))
	b.Drain()
	persistAll(t, b, f, &next)
	acks := pubAcks(f.clients[1])
	if len(acks) != 2 || acks[1].Seq != 2 {
		t.Fatalf("publish after room returned: acks %v", acks)
	}
}
