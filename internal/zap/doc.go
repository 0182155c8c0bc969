// Package zap is the ZapViewers application of P2S (DEBS 2014 §3.3) as pure
// state machines: the events set-top boxes publish, a seeded model of when
// they publish them, and the viewer statistics a subscriber computes from
// them (viewers per channel, the top-N channels).
//
// # Events
//
// P2S §3.3 gives two event types, encoded as text of typically less than 60
// bytes: a channel change ⟨DATE, TIME, STB-IP, TOCH, FROMCH⟩ and a status
// change ⟨DATE, TIME, STB-IP, STATUS⟩, where STATUS is a volume change on a
// scale of 0–100, mute/unmute, or power on/off. Event.Encode writes them as
// comma-separated fields, e.g.
//
//	2026-01-01,18:00:03.250,10.0.1.17,ch004,ch012
//	2026-01-01,18:00:09.010,10.0.1.17,vol=35
//
// and Parse tells them apart by their number of fields, as the paper does.
// FROMCH is "-" for a box's first reported channel.
//
// # The timing model
//
// The real logs of the paper are not available, so Generator models them
// from what P2S §3.3 and §4.1 say about the boxes, with the usual shape of
// zapping behaviour for the rest (constants below):
//
//   - every box starts switched off and powers on within the first minute;
//   - a box stays on a channel for a dwell time drawn from a mixture: a
//     zap (channel surfing, exponential, mean 2.5 s) or a watch
//     (Pareto, x_m = 20 s, α = 1.2: heavy-tailed, mean 2 min, capped at 3 h);
//   - after a zap the next channel is the neighbouring one (up, or
//     sometimes down) with probability 0.8; otherwise, and after a watch, it
//     is drawn from a Zipf popularity law (s = 1) over the channels;
//   - a watch ends with the box powering off with probability 0.05, for an
//     exponential time (mean 20 min); it powers on to its last channel;
//   - during a watch the viewer changes the volume (probability 0.15) or
//     mutes and unmutes (0.03);
//   - as in the real deployment (§4.1), a box records a channel change only
//     for a channel it stays on at least 3 seconds, and sends what it
//     recorded every 10 seconds (each box at its own phase); status events
//     are recorded at once.
//
// Boxes are shared round-robin among the publishers (box i goes to
// publisher i mod P), so each box's events travel in order through one
// publisher, and the stream is a pure function of the Config and the seed.
//
// # Viewers
//
// State applies events in order: a channel change moves its box to TOCH
// (the previous channel losing a viewer if the box was counted there), power
// off and on remove and restore the box on its last channel. State is exact
// after a restart when it is restored from a snapshot taken together with
// the checkpoint token that covers exactly the events applied (Marshal,
// Unmarshal).
package zap
