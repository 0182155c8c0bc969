package ops

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/tick"
)

// collector turns broker snapshots into metrics at scrape time: the
// engine's counters are read from its loop, never shared with it.
type collector struct {
	nodes []*broker.Node
	topo  Topology // for the state of every configured link
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("aerie_"+name, help, append([]string{"broker"}, labels...), nil)
}

var (
	counters = []struct {
		d   *prometheus.Desc
		get func(*broker.Status) uint64
	}{
		{desc("events_delivered_total", "Events handed to local subscribers."), func(s *broker.Status) uint64 { return s.Stats.Delivered }},
		{desc("nacks_sent_total", "Nacks sent upstream."), func(s *broker.Status) uint64 { return s.Stats.NacksSent }},
		{desc("nack_ticks_sent_total", "Ticks covered by the nacks sent upstream."), func(s *broker.Status) uint64 { return s.Stats.NackTicksSent }},
		{desc("nacks_received_total", "Nacks received from downstream."), func(s *broker.Status) uint64 { return s.Stats.NacksReceived }},
		{desc("retransmissions_total", "Knowledge messages sent to answer nacks."), func(s *broker.Status) uint64 { return s.Stats.Retransmissions }},
		{desc("duplicate_publishes_total", "Publishes recognised as retries and not logged again."), func(s *broker.Status) uint64 { return s.Stats.DuplicatePublishes }},
		{desc("sideways_relays_total", "Messages relayed through a cell peer."), func(s *broker.Status) uint64 { return s.Stats.Relayed }},
		{desc("refetches_total", "Payload refetches sent upstream by a bounded cache."), func(s *broker.Status) uint64 { return s.Stats.Refetches }},
		{desc("contradictions_total", "Contradictory knowledge joined: must stay 0."), func(s *broker.Status) uint64 { return uint64(s.Stats.Contradictions) }},
		{desc("disk_full_total", "Times an append to the event log failed on a full disk: publishes were refused until the log could be written again."), func(s *broker.Status) uint64 { return s.DiskFullTimes }},
		{desc("publishes_refused_disk_total", "Publishes refused for want of room on the event log's disk (a full disk, or less room than disk_reserve)."), func(s *broker.Status) uint64 { return s.PublishesRefusedDisk }},
		{desc("memory_shed_total", "Times this broker began shedding its payload caches for its live heap nearing memory_budget (docs/RELIABILITY.md \"Running for weeks\")."), func(s *broker.Status) uint64 { return s.MemorySheds }},
		{desc("auth_failures_total", "Clients refused for a bad user name or password."), func(s *broker.Status) uint64 { return s.AuthFailures }},
		{desc("publishes_dropped_total", "Publishes that asked for no ack, dropped because too many waited for their pubend's congestion-controlled rate."), func(s *broker.Status) uint64 { return s.Stats.PublishesDropped }},
		{desc("publishes_held_total", "Publishes that waited for their pubend's congestion-controlled rate."), func(s *broker.Status) uint64 { return s.Stats.PublishesHeld }},
		{desc("congestion_rate_decreases_total", "Times a hosted pubend lowered its rate on a congestion alert (Gryphon CC eq. 2, 3)."), func(s *broker.Status) uint64 { return s.Stats.RateDecreases }},
		{desc("congestion_alerts_sent_total", "Congestion alerts (UCA) sent upstream."), func(s *broker.Status) uint64 { return s.Stats.UCAsSent }},
		{desc("congestion_recoveries_total", "Times a subscriber broker started recovering a stream (Gryphon CC §4)."), func(s *broker.Status) uint64 { return s.Stats.Recoveries }},
		{desc("congestion_ignored_total", "Congestion queries or alerts ignored: from outside the pubend's tree, or with an impossible rate."), func(s *broker.Status) uint64 { return s.Stats.CCIgnored }},
		{desc("handshake_failures_total", "Connections refused before they were up: TLS, Hello, certificate name or credentials."), func(s *broker.Status) uint64 { return s.HandshakeFailures }},
		{desc("durable_replays_total", "Replay requests a subscriber broker sent for durable catch-ups, first time and repeats."), func(s *broker.Status) uint64 { return s.Durable.Replays }},
		{desc("durable_replay_events_total", "Events delivered to durable subscribers from catch-up replays."), func(s *broker.Status) uint64 { return s.Durable.ReplayEvents }},
		{desc("durable_gaps_total", "Gap notices sent to subscribers: ticks released before they had them (max_retain, max_retain_bytes)."), func(s *broker.Status) uint64 { return s.Durable.Gaps }},
		{desc("durable_catchup_window_pauses_total", "Catch-up requests not sent because every catch-up they serve had its window full: subscribers slower than their backlog."), func(s *broker.Status) uint64 { return s.Durable.WindowPauses }},
		{desc("durable_catchup_window_cuts_total", "Catch-up chunks delivered only in part, up to a subscriber's window."), func(s *broker.Status) uint64 { return s.Durable.WindowCuts }},
		{desc("downstreams_gone_total", "Downstream cells judged gone: silent for longer than their pubend's max_retain, so they no longer held the release."), func(s *broker.Status) uint64 { return s.Stats.DownstreamsGone }},
		{desc("resyncs_total", "Resyncs a subscriber broker asked of a pubend after coming back from gone."), func(s *broker.Status) uint64 { return s.Stats.Resyncs }},
		{desc("relayed_publishes_total", "Publishes of this broker's clients relayed one hop up towards a pubend hosted elsewhere (a resend counts again)."), func(s *broker.Status) uint64 {
			if s.Relay == nil {
				return 0
			}
			return s.Relay.Relayed
		}},
		{desc("relayed_publishes_taken_total", "Publishes relayed to this broker from below, taken on towards their pubend."), func(s *broker.Status) uint64 {
			if s.Relay == nil {
				return 0
			}
			return s.Relay.Taken
		}},
	}
	peersDesc    = desc("peers", "Connected neighbour brokers.")
	clientsDesc  = desc("clients", "Connected clients.")
	logDesc      = desc("log_records", "Records the event log holds (hosted pubends).")
	chaosDesc    = desc("chaos_actions_total", "Actions of the chaos monkey in this broker, by kind: failures the monkey caused, not real ones.", "action")
	dhDesc       = desc("stream_doubt_horizon_tick", "Doubt horizon of a pubend's stream: every tick up to it is known.", "pubend")
	lagDesc      = desc("stream_unknown_ticks", "Ticks known above the doubt horizon's gaps: how far the stream is behind what it has heard.", "pubend")
	gapsDesc     = desc("stream_gaps", "Gaps a subscriber broker is recovering by nacking.", "pubend")
	pubDesc      = desc("events_published_total", "Events a hosted pubend announced since the broker started.", "pubend")
	lagDesc2     = desc("stream_doubt_horizon_lag_seconds", "How far a pubend's doubt horizon is behind this broker's clock: the delay before an event can be delivered here.", "pubend")
	fsyncDesc    = desc("fsync_seconds", "Latency of the event log's fsyncs (one per group commit).")
	batchDesc    = desc("group_commit_records", "Records per group commit of the event log.")
	linkDesc     = desc("link_up", "1 when the connection the config asks for with a neighbour broker is up, else 0.", "peer")
	fwdDesc      = desc("events_forwarded_total", "Events sent to a downstream cell (first-time and in answer to its nacks).", "cell")
	limitDesc    = desc("congestion_rate_limit", "A hosted pubend's publication rate limit in events per second (0: unlimited).", "pubend")
	heldDesc     = desc("congestion_held_publishes", "Publishes waiting for a hosted pubend's rate.", "pubend")
	dhRateDesc   = desc("congestion_dh_rate", "Smoothed doubt-horizon rate of a subscriber broker's stream, in tick-seconds per second (1: keeping up).", "pubend")
	recDesc      = desc("congestion_recovering", "1 while a subscriber broker is recovering the stream.", "pubend")
	nwndDesc     = desc("congestion_nack_window_ms", "The NACK window of a recovering stream, in milliseconds of pubend time.", "pubend")
	raftEntDesc  = desc("raft_log_entries", "Entries in this replicated PHB member's Raft log (after the snapshot it was compacted to).")
	raftByDesc   = desc("raft_log_bytes", "Bytes of this replicated PHB member's Raft log files.")
	raftCmpDesc  = desc("raft_log_compactions_total", "Compactions of this replicated PHB member's Raft log since it started.")
	raftSnDesc   = desc("raft_snapshots_installed_total", "Snapshots (the leader's store image) this replicated PHB member installed to catch up.")
	raftXfDesc   = desc("raft_snapshot_transfers_total", "Snapshots larger than one chunk this replicated PHB member sent or received whole, or abandoned (a leader change, a crash, silence), since it started.", "result")
	raftDropDesc = desc("raft_snapshot_chunks_dropped_total", "Snapshot chunks this replicated PHB member dropped (stale, out of order, or bad: its log says which), since it started.")
	raftRjDesc   = desc("raft_rejoins_total", "Times this replicated PHB member found its Raft state lost (a new or wiped data directory) and rejoined its cell as a new member, since it started.")
	diskFullDesc = desc("disk_full", "1 while this broker refuses publishes for want of room on its event log's disk (a failed append on a full disk, or less room than disk_reserve), else 0.")
	shedDesc     = desc("memory_shedding", "1 while this broker sheds its payload caches because its live heap is above 75 % of memory_budget (until it is below 60 %), else 0.")
	heapDesc     = desc("memory_live_heap_bytes", "The live heap this broker's process last sampled against memory_budget (0: no budget).")
	logBytesDesc = desc("log_bytes", "Bytes of the event log on disk (hosted pubends): what retention keeps.")
	relLagDesc   = desc("release_lag_seconds", "How far a hosted pubend's release point is behind this broker's clock: the age of the oldest event its log must keep. It stays near the ack round trip unless a downstream or a durable subscriber holds the release, or max_retain lets it go.", "pubend")
	retBytesDesc = desc("retained_bytes", "Bytes of a hosted pubend's logged events that are not released yet (events' encoded sizes): what max_retain and max_retain_bytes bound.", "pubend")
	retEvDesc    = desc("retained_events", "A hosted pubend's logged events that are not released yet.", "pubend")
	ackLagDesc   = desc("downstream_ack_lag_seconds", "How far a downstream cell's acknowledgements of a pubend's stream are behind this broker's clock: the cell with the largest lag is the one that holds the release here.", "pubend", "cell")
	heldLagDesc  = desc("downstream_released_lag_seconds", "How far the release point a downstream cell reported (what its durable subscribers have acknowledged) is behind this broker's clock.", "pubend", "cell")
	holderDesc   = desc("release_holder", "1 for the downstream cell (or this broker, for durable subscribers it hosts) whose acknowledgements hold a pubend's release here, 0 for every other: the one with the lowest ack prefix or reported released or delivered value, not gone. How long it has held it: aerie_release_lag_seconds at the pubend, its aerie_downstream_ack_lag_seconds and aerie_downstream_released_lag_seconds.", "pubend", "cell")
	cacheDesc    = desc("payload_cache_bytes", "Payload bytes a broker keeps in memory for a pubend's events (encoded sizes): what relay_cache_bytes bounds at an IB or SHB, pubend_cache_bytes at the pubend's PHB.", "pubend")
	fwdCliDesc   = desc("forward_clients", "Clients this replicated PHB member forwards for to its serving leader.")
	fwdStrDesc   = desc("forward_streams", "Streams other members of its cell forward to this serving member, each a client session of its shell.")
	fwdRefDesc   = desc("forward_refused_streams", "Streams forwarded to this member of which it refused a publish, kept until their end, their link's loss or their member's restart (a member of protocol version 13: its link down for twice the forward timeout).")
	delivDesc    = desc("congestion_delivered_rate", "How fast a hosted pubend's tree acknowledged its events over the last two seconds, in events per second (what a rate decrease is bounded by).", "pubend")
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, x := range counters {
		ch <- x.d
	}
	for _, d := range []*prometheus.Desc{peersDesc, clientsDesc, logDesc, chaosDesc, dhDesc, lagDesc, gapsDesc, pubDesc, lagDesc2, linkDesc, fwdDesc, fsyncDesc, batchDesc, limitDesc, heldDesc, dhRateDesc, recDesc, nwndDesc, raftEntDesc, raftByDesc, raftCmpDesc, raftSnDesc, raftXfDesc, raftDropDesc, raftRjDesc, delivDesc, logBytesDesc, diskFullDesc, shedDesc, heapDesc, relLagDesc, retBytesDesc, retEvDesc, ackLagDesc, heldLagDesc, holderDesc, cacheDesc, fwdCliDesc, fwdStrDesc, fwdRefDesc} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st, _ := statuses(context.Background(), c.nodes) // a broker that does not answer is left out
	for i := range st {
		s := &st[i]
		for _, x := range counters {
			ch <- prometheus.MustNewConstMetric(x.d, prometheus.CounterValue, float64(x.get(s)), s.ID)
		}
		ch <- prometheus.MustNewConstMetric(peersDesc, prometheus.GaugeValue, float64(len(s.Peers)), s.ID)
		ch <- prometheus.MustNewConstMetric(clientsDesc, prometheus.GaugeValue, float64(s.Clients), s.ID)
		ch <- prometheus.MustNewConstMetric(logDesc, prometheus.GaugeValue, float64(s.LogNext-s.LogFirst), s.ID)
		ch <- prometheus.MustNewConstMetric(logBytesDesc, prometheus.GaugeValue, float64(s.LogBytes), s.ID)
		full := 0.0
		if s.DiskFull != "" {
			full = 1
		}
		ch <- prometheus.MustNewConstMetric(diskFullDesc, prometheus.GaugeValue, full, s.ID)
		shedding := 0.0
		if s.Shedding {
			shedding = 1
		}
		ch <- prometheus.MustNewConstMetric(shedDesc, prometheus.GaugeValue, shedding, s.ID)
		ch <- prometheus.MustNewConstMetric(heapDesc, prometheus.GaugeValue, float64(s.LiveHeap), s.ID)
		collectRelease(ch, s, time.Now().UnixMilli())
		if r := s.Raft; r != nil {
			collectForward(ch, s)
			ch <- prometheus.MustNewConstMetric(raftEntDesc, prometheus.GaugeValue, float64(r.LogEntries), s.ID)
			ch <- prometheus.MustNewConstMetric(raftByDesc, prometheus.GaugeValue, float64(r.LogBytes), s.ID)
			ch <- prometheus.MustNewConstMetric(raftCmpDesc, prometheus.CounterValue, float64(r.Compactions), s.ID)
			ch <- prometheus.MustNewConstMetric(raftSnDesc, prometheus.CounterValue, float64(r.SnapshotsInstalled), s.ID)
			ch <- prometheus.MustNewConstMetric(raftRjDesc, prometheus.CounterValue, float64(r.Rejoins), s.ID)
			for result, v := range map[string]uint64{"sent": r.TransfersSent, "received": r.TransfersReceived, "abandoned": r.TransfersAbandoned} {
				ch <- prometheus.MustNewConstMetric(raftXfDesc, prometheus.CounterValue, float64(v), s.ID, result)
			}
			ch <- prometheus.MustNewConstMetric(raftDropDesc, prometheus.CounterValue, float64(r.ChunksDropped), s.ID)
		}
		for action, n := range s.Chaos {
			ch <- prometheus.MustNewConstMetric(chaosDesc, prometheus.CounterValue, float64(n), s.ID, action)
		}
		for _, ps := range s.Streams {
			p := string(ps.Pubend)
			ch <- prometheus.MustNewConstMetric(dhDesc, prometheus.GaugeValue, float64(ps.DoubtHorizon), s.ID, p)
			ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(ps.KnownHi-min(ps.KnownHi, ps.DoubtHorizon)), s.ID, p)
			ch <- prometheus.MustNewConstMetric(gapsDesc, prometheus.GaugeValue, float64(ps.Gaps), s.ID, p)
			ch <- prometheus.MustNewConstMetric(cacheDesc, prometheus.GaugeValue, float64(ps.Cached), s.ID, p)
			if ps.Hosted {
				ch <- prometheus.MustNewConstMetric(pubDesc, prometheus.CounterValue, float64(ps.Published), s.ID, p)
			}
			if ps.DoubtHorizon > 0 {
				lag := max(0, time.Now().UnixMilli()-ps.DoubtHorizon.Millis())
				ch <- prometheus.MustNewConstMetric(lagDesc2, prometheus.GaugeValue, float64(lag)/1000, s.ID, p)
			}
		}
		for _, h := range []struct {
			d *prometheus.Desc
			h broker.Histogram
		}{{fsyncDesc, s.Fsync}, {batchDesc, s.Batch}} {
			buckets := make(map[float64]uint64, len(h.h.Bounds))
			for i, b := range h.h.Bounds {
				buckets[b] = h.h.Counts[i]
			}
			ch <- prometheus.MustNewConstHistogram(h.d, h.h.Count, h.h.Sum, buckets, s.ID)
		}
		for _, peer := range c.topo.neighbours([]string{s.ID}) {
			up := 0.0
			if slices.Contains(s.Peers, peer.ID) {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(linkDesc, prometheus.GaugeValue, up, s.ID, peer.ID)
		}
		for _, down := range slices.Sorted(maps.Keys(s.Forwarded)) {
			ch <- prometheus.MustNewConstMetric(fwdDesc, prometheus.CounterValue, float64(s.Forwarded[down]), s.ID, down)
		}
		for _, cc := range s.Congestion {
			p := string(cc.Pubend)
			ch <- prometheus.MustNewConstMetric(limitDesc, prometheus.GaugeValue, cc.Limit, s.ID, p)
			ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(cc.Held), s.ID, p)
			ch <- prometheus.MustNewConstMetric(delivDesc, prometheus.GaugeValue, cc.Delivered, s.ID, p)
			ch <- prometheus.MustNewConstMetric(dhRateDesc, prometheus.GaugeValue, cc.Rate, s.ID, p)
			rec := 0.0
			if cc.Recovering {
				rec = 1
			}
			ch <- prometheus.MustNewConstMetric(recDesc, prometheus.GaugeValue, rec, s.ID, p)
			ch <- prometheus.MustNewConstMetric(nwndDesc, prometheus.GaugeValue, float64(cc.NackWindow), s.ID, p)
		}
	}
}

// collectRelease reports, per pubend stream, how far behind the clock the
// release point and each downstream cell's acknowledgements are: an
// operator sees a log or a memory that grows coming, and which downstream
// holds it (Gryphon DS §3).
func collectRelease(ch chan<- prometheus.Metric, s *broker.Status, nowMs int64) {
	lag := func(t tick.Tick) float64 { return float64(max(0, nowMs-t.Millis())) / 1000 }
	for _, r := range s.Release {
		p := string(r.Pubend)
		if r.Hosted {
			ch <- prometheus.MustNewConstMetric(retBytesDesc, prometheus.GaugeValue, float64(r.RetainedBytes), s.ID, p)
			ch <- prometheus.MustNewConstMetric(retEvDesc, prometheus.GaugeValue, float64(r.RetainedEvents), s.ID, p)
		}
		if r.Hosted && r.Final > 0 {
			ch <- prometheus.MustNewConstMetric(relLagDesc, prometheus.GaugeValue, lag(r.Final), s.ID, p)
		}
		for _, d := range r.Downstream {
			if d.AckPrefix == 0 {
				continue // not heard from since this broker started
			}
			ch <- prometheus.MustNewConstMetric(ackLagDesc, prometheus.GaugeValue, lag(d.AckPrefix), s.ID, p, string(d.Cell))
			ch <- prometheus.MustNewConstMetric(heldLagDesc, prometheus.GaugeValue, lag(d.Released), s.ID, p, string(d.Cell))
		}
		holder, holds := releaseHolder(s.ID, r)
		for _, cell := range slices.Sorted(maps.Keys(holds)) {
			v := 0.0
			if cell == holder {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(holderDesc, prometheus.GaugeValue, v, s.ID, p, cell)
		}
	}
}

// releaseHolder names what holds a pubend's release at broker self: of
// its downstream cells not gone and, when durable subscribers here set a
// floor, self, the one whose hold is lowest (ties: the first by name). A
// downstream holds at the lowest of its ack prefix, its reported released
// and delivered values (gd updateRelease); one not heard from since this
// broker started holds everything. holds lists every candidate; none: no
// downstream and no floor.
func releaseHolder(self string, r gd.ReleaseState) (holder string, holds map[string]tick.Tick) {
	holds = map[string]tick.Tick{}
	if r.FloorSet {
		holds[self] = r.Floor
	}
	for _, d := range r.Downstream {
		if !d.Gone {
			holds[string(d.Cell)] = min(d.AckPrefix, d.Released, d.Delivered)
		}
	}
	for _, cell := range slices.Sorted(maps.Keys(holds)) {
		if holder == "" || holds[cell] < holds[holder] {
			holder = cell
		}
	}
	return holder, holds
}

// collectForward reports a replicated PHB member's forwarding: what it
// keeps per client it forwards for and per stream forwarded to it
// (forward.Forwarder, forward.Leader).
func collectForward(ch chan<- prometheus.Metric, s *broker.Status) {
	r := s.Raft
	ch <- prometheus.MustNewConstMetric(fwdCliDesc, prometheus.GaugeValue, float64(r.Forwarding), s.ID)
	ch <- prometheus.MustNewConstMetric(fwdStrDesc, prometheus.GaugeValue, float64(r.Forwarded), s.ID)
	ch <- prometheus.MustNewConstMetric(fwdRefDesc, prometheus.GaugeValue, float64(r.Refused), s.ID)
}
