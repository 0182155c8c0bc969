package node

// Mutation switches off one rule of a replicated PHB member. It exists
// only so that tests can show the oracle (or the package's own tests)
// catches each broken rule; production code never sets it (internal/arch
// TestMutationsStayInTests). One line each: what it breaks, then the test
// that catches it (sim tests are in internal/sim). The gd engine's
// switches are gd.Mutation (internal/gd/mutation.go); two more test-only
// rules sit with what they change: raftphb.Config.UnsafeBlankBootstrap
// (the replica) and shell.Config.TrimOnlyWhenIdle (the shell).
type Mutation uint

const (
	// MutAckOwnFsync: the serving leader acknowledges a batch once its own Raft log holds it, before a majority does. Caught by sim TestOracleBitesReplicated (I9).
	MutAckOwnFsync Mutation = 1 << iota
	// MutCompactUnsynced: compaction does not wait for the pubend store's fsync, so a crash loses records no log holds any more. Caught by node TestCompactUnsyncedIsCaught, sim TestOracleBitesReplicated (I9).
	MutCompactUnsynced
	// MutCorruptBlank: a member whose state is corrupt restarts under its old id with a blank log instead of as a new member. Caught by node TestCorruptBlankIsCaught.
	MutCorruptBlank
	// MutFirstFromPeers: a member takes the cell's configuration of today for its first one, as before raft.first was recorded. Caught by node TestFirstFromPeersIsCaught.
	MutFirstFromPeers
	// MutLeaderTrimOnly: not a fault, the older rule (the serving leader trims its own store and proposes no trim entry, so followers keep everything) that the sim's gd.MutAskSameMember test needs; used by sim TestOracleBitesAskSameMember.
	MutLeaderTrimOnly
)

func (m Mutation) has(x Mutation) bool { return m&x != 0 }
