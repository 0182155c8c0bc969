// Package chaos is `aerie chaos`: it runs an aerie network as child
// processes, with its own publishers and subscribers, injects seeded faults
// into the brokers and the links between them for a while, heals, and checks
// every delivery against the rules the simulator's oracle checks (docs/CONCEPTS.md
// "Invariants"): per subscription and pubend, no event twice and none out of order
// (I2, I3), no event its filter rejects and none that was not published
// (I1), and, after healing, every acknowledged publish its filter selects
// delivered, except inside the gap notices a subscription that had to
// subscribe again delivered in its place (I5). The built-in chaos monkey of
// a production system (the Geode engineer's "Chaos Monkey": it keeps killing
// processes, favours older ones now and then, and has blind spots an
// operator sets) is what it models; the [chaos] table's spare list is its
// blind spots.
//
// Faults: SIGKILL and restart of a broker ("kill"), SIGSTOP then SIGCONT
// ("stall"), and, through an in-process TCP proxy on every connection a
// broker dials, a link that refuses and drops everything ("cut") or accepts
// and forwards nothing ("linkstall"), as Gryphon GD (DSN 2002 §4.2) injects
// them. What it cannot do is printed first as blind spots.
package chaos
