// Package stream holds the per-pubend stream structures of one broker in the
// tree version of the Gryphon GD protocol (seed 000 §3.1): the input stream
// istream[P], the output streams ostream[P,c] joined to it by filter edges,
// the subend's gap tracker with its liveness timers (seed 000 §3.2), and the
// pubend that assigns ticks (docs/CONCEPTS.md "Ticks", P2).
//
// An ostream does not copy knowledge: its knowledge at t is the filter of the
// istream's knowledge at t, evaluated when a message is built. This is safe
// because every message sent down a link covers either ticks the ostream has
// never sent (above SentHi, "first-time") or exactly the ostream's C ticks (a
// retransmission): a downstream never receives a second value for a tick it
// already knows, so a filter that widened in between cannot contradict it.
//
// Pure: no clock, no I/O, no goroutines. Time arrives as tick.Time values.
package stream
