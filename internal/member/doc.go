// Package member is aerie's membership view layer: it turns a failure
// detector's reports (a member is alive, suspect, failed, has left) into
// installed views with the properties seed 001 lists for Apache Geode:
//
//   - static metadata per member (broker id, boot nonce, addresses, cell,
//     role), known when the member joins;
//   - monotonically increasing view ids;
//   - a stable member order whose first member, the elder, is the oldest;
//   - members that crashed told apart from members that left gracefully;
//   - a cluster that devolves to one member and keeps going;
//   - concurrent start of the first members without split clusters;
//   - frequent churn: a restarted broker is a new incarnation (new boot
//     nonce) that supersedes the old one.
//
// The package is a pure state machine in the style of etcd's raft and of
// internal/gd: Step feeds one input with the current time, Ready returns the
// views installed and the messages to send, Advance acknowledges a Ready. It
// starts no goroutines, reads no clock and touches no socket, so the
// simulator drives it with a simulated failure detector and
// internal/member/mlist drives it with hashicorp/memberlist.
//
// # How views are made
//
// The elder issues every view (Geode's membership coordinator, seed 001).
// A member's elder is the first member of its installed view that its
// failure detector has not declared failed or left. When a member finds
// itself elder and its failure detector disagrees with the installed view
// (a member failed or left, a new member is alive, a broker restarted with a
// new boot nonce), it issues the next view: surviving members keep their
// order, new members are appended sorted by name. The new view's id is one
// more than the highest id the elder has seen in any message, so a new elder
// continues from where the old one stopped and ids never go back. The elder
// announces the view to its members, who install it if its id is higher
// than their own; it re-announces to members that have not acknowledged.
// A member taking over from a dead elder first probes the live members for
// their views, and waits until every one of them answered or is declared
// dead (asking again every ProbeTimeout), so it does not reuse an id the
// dead elder managed to announce to some of them. A member accepts a view from a successor only
// if its own failure detector does not report alive a member ranked before
// that successor. The successor must hold the view it leads: it adopts an
// announcement from an elder its detector already reports dead (the other
// members drop it and wait for the successor), and the members tell the
// successor their view until it acknowledges it.
//
// # Fencing
//
// A view may replace the one before it only if it keeps a majority of that
// view's brokers: a broker counts as kept when the new view holds any
// incarnation of it (a newer one proves the old crashed rather than sits
// across a partition), members the new view records as left do not count,
// and exactly half is enough only when it holds the old view's first
// counted member (of two halves exactly one does, as Geode's lead member
// weighs more than the others). The elder applies the rule before it
// makes a view, and so does a member excluded from its view before it
// bootstraps a fresh one. A member whose failure detector sees no majority
// of its installed view reports Quorate false and makes no view: on the
// minority side of a partition it keeps its view until the partition
// heals, then follows the majority's lineage (or absorbs it by the merge
// rule below). A cluster still devolves to one member, a minority at a
// time; losing a majority at once fences the survivors until enough of the
// lost brokers come back. A member with no view to fence against (a fresh
// incarnation that reached nobody) may still bootstrap one of its own.
//
// Crash or leave: the failure detector's Failed is a crash, Departed a
// leave. A member that leaves says Bye to the others first, so that its
// departure counts as a leave even if the detector reports it as a death
// (memberlist v0.7's NotifyLeave does not say which it was).
//
// A fresh member learns the current view from the seed it joined through
// (memberlist's push/pull state exchange) and waits to be admitted. A member
// that has heard of no live view waits Config.JoinSettle after it starts;
// then the member with the smallest name among those its failure detector
// sees alive bootstraps view 1 and the others wait for it. Concurrently
// started first members thus form one cluster as long as their failure
// detectors see each other within JoinSettle.
//
// When that fails (a member could not reach any seed within JoinSettle, or
// a partition healed) two views may carry the same id. Members that meet
// such a conflict forward their view to the other view's elder; of two
// conflicting elders the one with the smaller name (or the only one still
// alive) issues a fresh view with a higher id containing everybody, and the
// other yields. Such a merge is the one case where the merged elder need
// not be the oldest member.
//
// Known limit: there is no two-phase view installation. The takeover probe
// is complete only if the dead elder's announcements arrive before the
// failure detector declares it dead (messages take milliseconds, detection
// hundreds of them) and the successor's detector knows every member the
// dead elder admitted. If not, the successor may reuse the id of a view a
// live member installed (ids still increase at every member, and the
// conflict rule converges everyone). The member package's 2000-seed run no
// longer tolerates it and saw none.
package member
