// Package pfs is the persistent filtering subsystem of a subscriber-hosting
// broker (Gryphon durable subscriptions, DSN 2003 §4.2): for one pubend, it
// remembers which ticks matched which durable subscriber, so that a
// subscriber coming back after a disconnect can be told, without
// refiltering anything, which ticks it must fetch (Q) and which are silence
// for it (S). It stores matches, never events: each event stays logged once,
// at its pubend.
//
// # Records
//
// A PFS is an eventlog (segmented, CRC-framed, group commit, torn-tail
// repair; see package eventlog) of two kinds of record, all integers
// unsigned varints:
//
//	match:    0x01 | tick | n | n × (subscriber, prev)
//	cover:    0x02 | tick
//	restart:  0x03 | tick
//
// A match record lists the subscribers whose filters selected the event at
// tick; prev is the log index of that subscriber's previous match record
// plus one (0: none), so each subscriber's matches form a chain of
// back-pointers through the log (the paper's prevIndex; 8 + 16·n bytes there,
// fewer here with varints). A cover record says that every tick up to its
// tick has been filtered: a tick at or below it with no match record for a
// subscriber is silence for that subscriber (the paper's lastTimestamp).
// Records are appended in tick order, so the ticks of successive records
// never decrease, except after a restart record: match records between the
// last cover and a restart are dead (their ticks were never covered, so the
// SHB filtered them again after a crash and recorded them anew), and Open
// skips them.
//
// # Reads
//
// Read(s, [a, b]) walks s's chain back from its last match: ticks of its
// records inside the range are matched (Q: fetch them), the other ticks up
// to the last cover are S, and ticks above the last cover are not known yet.
// The paper's example, s3 matched at ticks 1 and 4, covered to 5, read
// [1, 10]: Q S S Q S, then 6–10 unknown.
//
// # Crashes and release
//
// A crash keeps a prefix of the records (eventlog). A cover record follows
// the match records it covers, so a lost tail loses covers with their
// matches: ticks whose matches were lost read as unknown, never as S. A
// PFS that lost its tail therefore costs refiltering, never an event.
// Callers persist anything that depends on a cover (the SHB's
// latestDelivered) only after Sync returned and DurableCovered passed it.
// Release(t) removes whole segments whose records all lie at or below t:
// ticks the release protocol made final (L) at every subscriber.
//
// A PFS is not safe for concurrent use and starts no goroutines.
package pfs
