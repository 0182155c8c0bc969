package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
)

// replicatedNet is a PHB cell of three members (a Raft group for P1, P2)
// feeding one SHB.
const replicatedNet = `[[broker]]
id = "p3"
cell = "phb"
listen = "h:3"
clients = "h:13"
data = "d/p3"
pubends = ["P2", "P1"]
[[broker]]
id = "p1"
cell = "phb"
listen = "h:1"
clients = "h:11"
data = "d/p1"
pubends = ["P1", "P2"]
[[broker]]
id = "p2"
cell = "phb"
listen = "h:2"
clients = "h:12"
data = "d/p2"
pubends = ["P1", "P2"]
[[broker]]
id = "s1"
listen = "h:4"
clients = "h:14"
[[link]]
up = "phb"
down = "s1"
`

// TestReplicatedCell: brokers of one cell listing the same pubends form a
// Raft group; their Raft ids follow the sorted ids, not the file order; the
// downstream dials every member (a link bundle), members dial their
// higher-id cell peers (the Raft transport).
func TestReplicatedCell(t *testing.T) {
	n, err := Parse([]byte(replicatedNet), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n.Replicas("p3"), []string{"p1", "p2", "p3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Replicas(p3) = %v, want %v", got, want)
	}
	for id, want := range map[string]uint64{"p1": 1, "p2": 2, "p3": 3, "s1": 0} {
		if got := n.RaftID(id); got != want {
			t.Errorf("RaftID(%s) = %d, want %d", id, got, want)
		}
	}
	if got := n.Replicas("s1"); got != nil {
		t.Errorf("Replicas(s1) = %v, want nil", got)
	}
	if got, want := n.Routes("p2"), []gd.Route{{Pubend: "P1", Down: ids("s1")}, {Pubend: "P2", Down: ids("s1")}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Routes(p2) = %+v, want %+v", got, want)
	}
	if got, want := n.Dials("s1"), []string{"p1", "p2", "p3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Dials(s1) = %v, want %v", got, want)
	}
	if got, want := n.Dials("p1"), []string{"p2", "p3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Dials(p1) = %v, want %v", got, want)
	}
}

// withMembers returns replicatedNet with its cell grown to k members (p1
// to pk; k at least 3).
func withMembers(k int) string {
	src := replicatedNet
	for i := 4; i <= k; i++ {
		src += fmt.Sprintf("[[broker]]\nid = \"p%d\"\ncell = \"phb\"\nlisten = \"h:%d\"\ndata = \"d/p%d\"\npubends = [\"P1\", \"P2\"]\n", i, 100+i, i)
	}
	return src
}

// TestEvenReplicatedCell: a cell of 2, 4 or 6 members is accepted (the
// broker warns about it at start: raftphb.EvenCellWarning), with the slots and
// links of any replicated cell, and raft_clients and
// raft_election_timeout apply to its members; 1 member is a single PHB,
// and 8 are refused (TestReplicatedCellErrors).
func TestEvenReplicatedCell(t *testing.T) {
	two := strings.Replace(replicatedNet, "[[broker]]\nid = \"p3\"\ncell = \"phb\"\nlisten = \"h:3\"\nclients = \"h:13\"\ndata = \"d/p3\"\npubends = [\"P2\", \"P1\"]\n", "", 1)
	two = strings.Replace(two, "id = \"p1\"\n", "id = \"p1\"\nraft_clients = \"redirect\"\nraft_election_timeout = \"300ms\"\n", 1)
	two = strings.Replace(two, "id = \"p2\"\n", "id = \"p2\"\nraft_election_timeout = \"300ms\"\n", 1)
	for _, c := range []struct {
		k   int
		src string
	}{{2, two}, {4, withMembers(4)}, {6, withMembers(6)}} {
		n, err := Parse([]byte(c.src), "net.toml")
		if err != nil {
			t.Fatalf("%d members: %v", c.k, err)
		}
		var want []string
		for i := 1; i <= c.k; i++ {
			want = append(want, fmt.Sprintf("p%d", i))
		}
		for i, id := range want {
			if got := n.Replicas(id); !reflect.DeepEqual(got, want) {
				t.Errorf("%d members: Replicas(%s) = %v, want %v", c.k, id, got, want)
			}
			if got := n.RaftID(id); got != uint64(i+1) {
				t.Errorf("%d members: RaftID(%s) = %d, want %d", c.k, id, got, i+1)
			}
		}
		if got := n.Dials("s1"); !reflect.DeepEqual(got, want) {
			t.Errorf("%d members: Dials(s1) = %v, want %v", c.k, got, want)
		}
		if got := n.Dials("p1"); !reflect.DeepEqual(got, want[1:]) {
			t.Errorf("%d members: Dials(p1) = %v, want %v", c.k, got, want[1:])
		}
	}
	n := mustParse(t, two)
	if b, _ := n.Broker("p1"); b.RaftClients != RaftClientsRedirect || b.RaftElection == nil || *b.RaftElection != 300*time.Millisecond {
		t.Errorf("p1 of a cell of 2: raft_clients %q, raft_election_timeout %v", b.RaftClients, b.RaftElection)
	}
}

// TestSinglePHBNotReplicated: a PHB in a cell of its own is what it always
// was.
func TestSinglePHBNotReplicated(t *testing.T) {
	n := mustParse(t, gossipNet)
	if got := n.Replicas("p1"); got != nil {
		t.Errorf("Replicas(p1) = %v, want nil", got)
	}
	if got := n.RaftID("p1"); got != 0 {
		t.Errorf("RaftID(p1) = %d, want 0", got)
	}
}

// TestReplicatedCellErrors: the refusals, each naming the cell and why.
func TestReplicatedCellErrors(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"eight members", withMembers(8),
			`cell "phb" hosts pubends on 8 brokers: a replicated PHB cell has 2 to 7 members (3, 5 or 7 is best: a Raft majority of an even number tolerates no more failures than one member less; past 7 every commit waits for more fsyncs)`},
		{"different pubends", strings.Replace(replicatedNet, `data = "d/p2"
pubends = ["P1", "P2"]`, `data = "d/p2"
pubends = ["P1"]`, 1),
			`net.toml:21:1: broker "p2": the members of replicated PHB cell "phb" must list the same pubends: p3 lists [P1, P2], p2 lists [P1]`},
		{"member without pubends", strings.Replace(replicatedNet, `data = "d/p2"
pubends = ["P1", "P2"]`, `data = "d/p2"`, 1),
			`the members of replicated PHB cell "phb" must list the same pubends: p3 lists [P1, P2], p2 lists []`},
		{"no data", strings.Replace(replicatedNet, `data = "d/p1"
`, ``, 1),
			`broker "p1": a member of replicated PHB cell "phb" needs a data directory`},
		{"link into the cell", replicatedNet + "[[broker]]\nid = \"x\"\nlisten = \"h:9\"\npubends = [\"P9\"]\n[[link]]\nup = \"x\"\ndown = \"phb\"\n",
			`cell "phb" is a replicated PHB cell and cannot be downstream of a link`},
		{"pubend in two cells", replicatedNet + "[[broker]]\nid = \"x\"\nlisten = \"h:9\"\npubends = [\"P1\"]\n",
			`pubend "P1" is hosted by two brokers, "p3" and "x"`},
	} {
		_, err := Parse([]byte(c.src), "net.toml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want error containing\n  %s\ngot\n  %v", c.name, c.want, err)
		}
	}
}

// TestRaftClients: raft_clients is read, written back by Marshal, and
// refused with a reason when it is not "forward" or "redirect", not a
// string, or set on a broker outside a replicated PHB cell.
func TestRaftClients(t *testing.T) {
	withKey := func(id, line string) string {
		return strings.Replace(replicatedNet, "id = \""+id+"\"\n", "id = \""+id+"\"\n"+line+"\n", 1)
	}
	n, err := Parse([]byte(withKey("p1", `raft_clients = "redirect"`)), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"p1": RaftClientsRedirect, "p2": ""} {
		if b, _ := n.Broker(id); b.RaftClients != want {
			t.Errorf("broker %s: raft_clients %q, want %q", id, b.RaftClients, want)
		}
	}
	again := remarshal(t, n)
	if b, _ := again.Broker("p1"); b.RaftClients != RaftClientsRedirect {
		t.Errorf("after Marshal: raft_clients %q, want %q", b.RaftClients, RaftClientsRedirect)
	}
	if _, err := Parse([]byte(withKey("p2", `raft_clients = "forward"`)), "net.toml"); err != nil {
		t.Errorf("forward: %v", err)
	}
	for _, c := range []struct{ name, src, want string }{
		{"unknown value", withKey("p2", `raft_clients = "proxy"`),
			`net.toml:17:1: broker "p2": raft_clients must be "forward" (a member that does not serve forwards a client's publishes to the leader) or "redirect" (it closes the client, which tries another member), not "proxy"`},
		{"case matters", withKey("p2", `raft_clients = "Forward"`), `not "Forward"`},
		{"empty", withKey("p2", `raft_clients = ""`), `broker "p2": raft_clients must be "forward" or "redirect" (leave it out for the default, "forward"), not an empty string`},
		{"not a string", withKey("p2", `raft_clients = true`), `raft_clients must be a string, not a boolean`},
		{"not a member", withKey("s1", `raft_clients = "forward"`),
			`broker "s1": raft_clients applies to the members of a replicated PHB cell (a cell of 2 to 7 brokers that host pubends), and this broker is not one`},
	} {
		_, err := Parse([]byte(c.src), "net.toml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want error containing\n  %s\ngot\n  %v", c.name, c.want, err)
		}
		if err != nil && strings.Count(err.Error(), "raft_clients") != 1 {
			t.Errorf("%s: reported more than once:\n%v", c.name, err)
		}
	}
	// A Network built in code is checked too.
	n.Brokers[0].RaftClients = "sometimes"
	if err := n.Validate(); err == nil || !strings.Contains(err.Error(), `raft_clients must be "forward" or "redirect", not "sometimes"`) {
		t.Errorf("Validate with raft_clients \"sometimes\": %v", err)
	}
}

// TestRaftElectionTimeout: raft_election_timeout is read and written back,
// and refused with a reason when it is not a duration, out of bounds, set
// outside a replicated PHB cell, or different between a cell's members.
func TestRaftElectionTimeout(t *testing.T) {
	all := replicatedNet
	for _, id := range []string{"p1", "p2", "p3"} {
		all = withKey(all, id, `raft_election_timeout = "300ms"`)
	}
	n, err := Parse([]byte(all), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := n.Broker("p2"); b.RaftElection == nil || *b.RaftElection != 300*time.Millisecond {
		t.Fatalf("raft_election_timeout: %v, want 300ms", b.RaftElection)
	}
	again := remarshal(t, n)
	if b, _ := again.Broker("p3"); b.RaftElection == nil || *b.RaftElection != 300*time.Millisecond {
		t.Errorf("after Marshal: raft_election_timeout %v, want 300ms", b.RaftElection)
	}
	for _, c := range []struct{ name, src, want string }{
		{"not a duration", strings.ReplaceAll(all, `"300ms"`, `"soon"`), `broker "p2": raft_election_timeout must be a duration such as "1s", not soon`},
		{"too short", strings.ReplaceAll(all, `"300ms"`, `"10ms"`), `raft_election_timeout 10ms is outside 100ms to 1m0s`},
		{"not a member", withKey(all, "s1", `raft_election_timeout = "1s"`),
			`broker "s1": raft_election_timeout applies to the members of a replicated PHB cell`},
		{"members differ", strings.Replace(all, `raft_election_timeout = "300ms"`, `raft_election_timeout = "2s"`, 1),
			`must have the same raft_election_timeout`},
		{"one member without", strings.Replace(all, `raft_election_timeout = "300ms"`+"\n", "", 1),
			`none (the default, 1s)`},
	} {
		_, err := Parse([]byte(c.src), "net.toml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want error containing\n  %s\ngot\n  %v", c.name, c.want, err)
		}
	}
}

// TestRaftSlot: a member's slot is its raft_slot, else its position among
// the members without one, skipping taken slots — so a cell that loses p2
// keeps p3 on slot 3 by giving it raft_slot = 3, and a newcomer "a0" that
// sorts first takes raft_slot = 4 without moving anyone.
func TestRaftSlot(t *testing.T) {
	slots := func(src string) map[string]uint64 {
		t.Helper()
		n, err := Parse([]byte(src), "net.toml")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]uint64{}
		for _, b := range n.Brokers {
			if id := n.RaftID(b.ID); id != 0 {
				out[b.ID] = id
			}
		}
		return out
	}
	if got, want := slots(replicatedNet), map[string]uint64{"p1": 1, "p2": 2, "p3": 3}; !reflect.DeepEqual(got, want) {
		t.Errorf("no raft_slot: %v, want %v", got, want)
	}
	// p2 removed, p3 keeps slot 3.
	without := strings.Replace(replicatedNet, "[[broker]]\nid = \"p2\"\ncell = \"phb\"\nlisten = \"h:2\"\nclients = \"h:12\"\ndata = \"d/p2\"\npubends = [\"P1\", \"P2\"]\n", "", 1)
	if got, want := slots(withKey(without, "p3", "raft_slot = 3")), map[string]uint64{"p1": 1, "p3": 3}; !reflect.DeepEqual(got, want) {
		t.Errorf("p2 removed, p3 raft_slot = 3: %v, want %v", got, want)
	}
	// a0 added on slot 4: p1, p2, p3 keep 1, 2, 3.
	added := replicatedNet + "[[broker]]\nid = \"a0\"\ncell = \"phb\"\nlisten = \"h:5\"\ndata = \"d/a0\"\npubends = [\"P1\", \"P2\"]\nraft_slot = 4\n"
	if got, want := slots(added), map[string]uint64{"a0": 4, "p1": 1, "p2": 2, "p3": 3}; !reflect.DeepEqual(got, want) {
		t.Errorf("a0 added on slot 4: %v, want %v", got, want)
	}
	// An explicit slot is skipped by the positional ones.
	if got, want := slots(withKey(replicatedNet, "p3", "raft_slot = 1")), map[string]uint64{"p1": 2, "p2": 3, "p3": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("p3 on slot 1: %v, want %v", got, want)
	}
	n, err := Parse([]byte(added), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	again := remarshal(t, n)
	if got := again.RaftID("a0"); got != 4 {
		t.Errorf("after Marshal: a0 on slot %d, want 4", got)
	}
	for _, c := range []struct{ name, src, want string }{
		{"zero", withKey(replicatedNet, "p1", "raft_slot = 0"), `broker "p1": raft_slot must be an integer from 1 to 255, not 0`},
		{"too high", withKey(replicatedNet, "p1", "raft_slot = 256"), `raft_slot must be an integer from 1 to 255, not 256`},
		{"a string", withKey(replicatedNet, "p1", `raft_slot = "1"`), `raft_slot must be an integer from 1 to 255, not 1`},
		{"not a member", withKey(replicatedNet, "s1", "raft_slot = 1"), `broker "s1": raft_slot applies to the members of a replicated PHB cell`},
		{"two on one slot", withKey(withKey(replicatedNet, "p1", "raft_slot = 7"), "p3", "raft_slot = 7"),
			`p1 and p3 of replicated PHB cell "phb" both have raft_slot 7`},
	} {
		_, err := Parse([]byte(c.src), "net.toml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want error containing\n  %s\ngot\n  %v", c.name, c.want, err)
		}
	}
}

// remarshal writes n and parses it again.
func remarshal(t *testing.T, n *Network) *Network {
	t.Helper()
	out, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(out, "marshalled")
	if err != nil {
		t.Fatal(err)
	}
	return again
}

// withKey adds line to broker id's table of src.
func withKey(src, id, line string) string {
	return strings.Replace(src, "id = \""+id+"\"\n", "id = \""+id+"\"\n"+line+"\n", 1)
}
