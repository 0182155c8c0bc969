package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/sim"
	"github.com/aerie-mq/aerie/internal/tick"
)

// runSim implements `aerie sim` (docs/GUIDE.md "Output for scripts"): one line per failing seed
// naming the invariant and the command that reproduces it; last line
// "sim: N runs, V violations"; exit 1 if V > 0.
func runSim(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aerie sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seeds := fs.Int("seeds", 100, "number of seeds to run")
	start := fs.Uint64("start", 1, "first seed")
	seed := fs.Int64("seed", -1, "run this one seed only, printing its plan first")
	faults := fs.String("faults", "", "comma-separated fault kinds allowed ("+strings.Join(sim.FaultNames(), ",")+"); default all, \"none\" for none")
	topology := fs.String("topology", "swarm", "topology: "+strings.Join(sim.TopologyNames(), ", ")+" (fig6 also runs the b1–s1 failure script of Gryphon GD §4.2; cc the link failure under a bandwidth cap of Gryphon CC §5 E1, cc-e2 its alternating bandwidth limit, E2; cc-e3 the five-SHB network of E3 with limits and a failure in several places; cc-e4 E1's failure for each Δt_rec of --dt-rec, E4; cc-collapse-ib and cc-collapse-pb the two collapses of Gryphon CC §2 without congestion control, Figs. 2–4: IB–SB1 throttled below the publication rate, and PB–IB limited while IB–SB2 is down 120 s)")
	trace := fs.Bool("trace", false, "write per-broker time series (latency, nacks sent, nack range) as CSV to sim-trace-<seed>.csv")
	traceFile := fs.String("trace-file", "", "write the trace CSV to this file instead (implies --trace)")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "seeds run in parallel (each run is single-threaded and deterministic)")
	faultPhase := fs.Duration("fault-phase", 0, "simulated time of publishing and faults (default 30s)")
	converge := fs.Duration("converge", 0, "simulated time allowed to converge after healing (default 60s)")
	gone := fs.Bool("release-gone", true, "a downstream silent for longer than max_retain (at least 5s) no longer holds the brokers above it, and resyncs from the pubend when it returns, as in brokers; false holds every broker above a dead downstream for ever")
	cc := fs.Bool("congestion-control", true, "run congestion control where the run calls for it (the swarm, as real brokers do; --topology cc, cc-e2, cc-e3, cc-e4, cc-collapse-ib, cc-collapse-pb); false shows the collapse of Gryphon CC §2")
	linkQueue := fs.Int("link-queue", 0, "bytes one direction of a capped link queues before the connection resets (default 256 KiB)")
	dtRec := fs.String("dt-rec", "", "--topology cc-e4: comma-separated values of Δt_rec (tick-s/s) to run (default the paper's -0.2 … 2.0 in steps of 0.2); with one value, that run alone (with --trace for its series)")
	ibCache := fs.Int64("ib-relay-cache", 0, "bytes of a pubend's events each IB keeps to answer nacks (gd RelayCacheBytes, default 64 MiB; --topology cc-collapse-pb sets 1 MiB, smaller than its outage)")
	nrtMin := fs.Duration("nrt", 0, "nack repetition threshold, the floor of the RTO estimate, as `aerie broker --nrt` (default 600ms): how soon an unanswered nack is repeated")
	formerName(fs, "nack-repetition-min", "nrt")
	noAck := fs.String("noack", "", "whether publishers send every third publish asking for no ack (at most once, as a client's PublishNoAck): on or off; none draws it per seed (on in a third). The oracle then asks only that what was logged be delivered, and that no such publish be acked")
	groups := fs.Bool("groups", false, "add a consumer group to the swarm: members at its home that join, acknowledge, leave and lose their connections, checked each event given to one member at a time and none lost (docs/CONCEPTS.md \"Consumer groups\")")
	anywhere := fs.String("anywhere", "", "whether each pubend of a plain PHB also has a publisher at an SHB of its tree, whose publishes the brokers relay up the tree to the PHB: on or off; none draws it per seed (on in half the runs without capped links). The oracle checks its publish order besides exactly once")
	raftClients := fs.String("raft-clients", "", "what a member of a replicated PHB cell that does not serve does with a publishing client: forward its publishes to the serving leader, or redirect it (close its connection; it moves to the next member); none draws one per seed. Either way every publisher of a cell resends in order on a new connection, and the oracle checks its publish order")
	watch := fs.String("watch", "", "diagnosis: with --seed, log to stderr every message and delivery concerning PUBEND@TICK")
	sc := scaleFlags(fs)
	usageWith(fs, "aerie sim [--seeds N] [--start S] [--seed S] [--faults LIST] [--topology NAME] [--trace]\n"+
		"       aerie sim --topology scale --brokers N --subscriptions M [--depth D] [--fanout F] [--pubends P] [--seed S]\n"+
		"       aerie sim --topology cc-e4 [--dt-rec LIST] [--nrt D] [--seed S]",
		"Run whole networks in the deterministic simulator: real protocol code (the shell, the GD engine, the wire "+
			"codec, the event log over a crashable in-memory disk) under simulated time, links and faults, every "+
			"invariant of docs/CONCEPTS.md checked after every step. Each seed draws a network, its publishers and "+
			"subscribers and a fault plan, and replays exactly. Prints one line per failing seed, naming the invariant "+
			"and the command that replays it, and last \"sim: N runs, V violations\"; exits 1 if V > 0. --topology scale "+
			"runs one large tree (docs/SCALE.md); cc-e4 prints the table of Gryphon CC §5 E4 (aerie experiment --case "+
			"cc-e4 plots it).",
		"aerie sim --seeds 2000",
		"aerie sim --seed 42 --faults crash,cut")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if err := firstErr(
		atLeast("seeds", *seeds, 0),
		atLeast("workers", *workers, 1),
		nonNegativeDuration("fault-phase", *faultPhase, "the default"),
		nonNegativeDuration("converge", *converge, "the default"),
		atLeast("link-queue", *linkQueue, 0),
		nonNegativeDuration("nrt", *nrtMin, "the default"),
		sc.check(),
		seedGiven(fs, *seed),
		watchValue(*watch),
	); err != nil {
		fmt.Fprintf(stderr, "aerie sim: %v\n", err)
		return 2
	}
	if *ibCache < 0 {
		fmt.Fprintf(stderr, "aerie sim: --ib-relay-cache %d: must be 0 or more (0: the default)\n", *ibCache)
		return 2
	}
	if *topology == "scale" {
		return runScale(sc, *seed, *faultPhase, *converge, stdout, stderr)
	}
	if *topology == "cc-e4" {
		vals, err := ccE4Values(*dtRec)
		if err != nil {
			fmt.Fprintf(stderr, "aerie sim: %v\n", err)
			return 2
		}
		if len(vals) > 1 { // the sweep of Gryphon CC §5 E4, as a table
			if *trace || *traceFile != "" {
				fmt.Fprintln(stderr, "aerie sim: --trace with --topology cc-e4 needs one --dt-rec value")
				return 2
			}
			tweak := func(o *sim.Options) {
				if *nrtMin > 0 {
					o.Config.NackRepetitionMin = *nrtMin
				}
			}
			flags := ""
			if *nrtMin > 0 {
				flags = " --nrt " + nrtMin.String()
			}
			return runCCE4(vals, *seed, *workers, tweak, flags, stdout, stderr)
		}
	}
	if sc.set(fs) {
		fmt.Fprintln(stderr, "aerie sim: --brokers, --subscriptions, --depth, --fanout, --pubends and --rate need --topology scale")
		return 2
	}
	mk := func(s uint64) sim.Options {
		o := sim.DefaultOptions(s)
		o.Topology = *topology
		if *topology == "fig6" {
			o.Scenario = "fig6"
			o.Config.DelayCuriosityThreshold = 0 // the seed's experiments ran with DCT = ∞
		}
		if *topology == "cc" {
			o = sim.CCOptions(s)
		}
		if *topology == "cc-e2" {
			o = sim.CCE2Options(s)
		}
		if *topology == "cc-e3" {
			o = sim.CCE3Options(s)
		}
		if *topology == "cc-e4" {
			vals, _ := ccE4Values(*dtRec) // one value, checked above
			o = sim.CCE4Options(s, vals[0])
		}
		if *topology == "cc-collapse-ib" {
			o = sim.CCCollapseIBOptions(s)
		}
		if *topology == "cc-collapse-pb" {
			o = sim.CCCollapsePBOptions(s)
		}
		if *ibCache > 0 {
			o.IBRelayCacheBytes = *ibCache
		}
		o.NoCongestionControl = !*cc
		o.Config.ReleaseGone = *gone
		if *nrtMin > 0 {
			o.Config.NackRepetitionMin = *nrtMin
		}
		if *linkQueue > 0 {
			o.LinkQueueBytes = *linkQueue
		}
		o.RaftClients = *raftClients
		o.NoAckPublishes = *noAck
		o.Anywhere = *anywhere
		o.Groups = *groups
		if *faults == "none" {
			o.Faults = []string{}
		} else if *faults != "" {
			o.Faults = strings.Split(*faults, ",")
		}
		if *faultPhase > 0 {
			o.FaultPhase = *faultPhase
		}
		if *converge > 0 {
			o.ConvergePhase = *converge
		}
		if *watch != "" {
			p, t, _ := strings.Cut(*watch, "@")
			v, _ := strconv.ParseUint(t, 10, 64) // checked above
			o.WatchPubend, o.WatchTick, o.WatchLog = msg.PubendID(p), tick.Tick(v), stderr
		}
		return o
	}
	replay := func(s uint64) string {
		var b strings.Builder
		fmt.Fprintf(&b, "go run ./cmd/aerie sim --seed %d", s)
		if *topology != "swarm" {
			fmt.Fprintf(&b, " --topology %s", *topology)
		}
		if *faults != "" {
			fmt.Fprintf(&b, " --faults %s", *faults)
		}
		if !*cc {
			b.WriteString(" --congestion-control=false")
		}
		if !*gone {
			b.WriteString(" --release-gone=false")
		}
		if *dtRec != "" {
			fmt.Fprintf(&b, " --dt-rec %s", *dtRec)
		}
		if *nrtMin > 0 {
			fmt.Fprintf(&b, " --nrt %s", *nrtMin)
		}
		if *linkQueue > 0 {
			fmt.Fprintf(&b, " --link-queue %d", *linkQueue)
		}
		if *ibCache > 0 {
			fmt.Fprintf(&b, " --ib-relay-cache %d", *ibCache)
		}
		if *raftClients != "" {
			fmt.Fprintf(&b, " --raft-clients %s", *raftClients)
		}
		if *noAck != "" {
			fmt.Fprintf(&b, " --noack %s", *noAck)
		}
		if *anywhere != "" {
			fmt.Fprintf(&b, " --anywhere %s", *anywhere)
		}
		if *groups {
			b.WriteString(" --groups")
		}
		return b.String()
	}
	first, n := *start, uint64(*seeds)
	if *seed >= 0 {
		first, n = uint64(*seed), 1
	}
	if *trace || *traceFile != "" {
		if n != 1 {
			fmt.Fprintln(stderr, "aerie sim: --trace needs a single --seed")
			return 2
		}
		name := *traceFile
		if name == "" {
			name = fmt.Sprintf("sim-trace-%d.csv", first)
		}
		f, err := os.Create(name)
		if err != nil {
			fmt.Fprintf(stderr, "aerie sim: %v\n", err)
			return 1
		}
		defer f.Close()
		o := mk(first)
		o.Trace = f
		defer fmt.Fprintf(stderr, "trace written to %s\n", name)
		return report(stdout, stderr, []uint64{first}, func(s uint64) sim.Options { return o }, replay, 1, true)
	}
	list := make([]uint64, n)
	for i := range list {
		list[i] = first + uint64(i)
	}
	return report(stdout, stderr, list, mk, replay, *workers, n == 1)
}

// seedGiven refuses a negative --seed given on the command line (its
// default, -1, means "not given").
func seedGiven(fs *flag.FlagSet, seed int64) error {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "seed" })
	if given && seed < 0 {
		return fmt.Errorf("--seed %d: must be 0 or more", seed)
	}
	return nil
}

// watchValue checks --watch PUBEND@TICK.
func watchValue(w string) error {
	if w == "" {
		return nil
	}
	p, t, ok := strings.Cut(w, "@")
	if _, err := strconv.ParseUint(t, 10, 64); !ok || p == "" || err != nil {
		return fmt.Errorf("--watch %q: want PUBEND@TICK, e.g. P1@42", w)
	}
	return nil
}

func report(stdout, stderr io.Writer, seeds []uint64, mk func(uint64) sim.Options, replay func(uint64) string, workers int, verbose bool) int {
	type outcome struct {
		res sim.Result
		err error
	}
	results := make([]outcome, len(seeds))
	var wg sync.WaitGroup
	jobs := make(chan int)
	var mu sync.Mutex
	done := 0
	began := time.Now()
	for w := 0; w < max(workers, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				r, err := sim.Run(mk(seeds[i]))
				results[i] = outcome{r, err}
				mu.Lock()
				done++
				if len(seeds) >= 100 && done%100 == 0 {
					fmt.Fprintf(stderr, "sim: %d/%d runs (%s)\n", done, len(seeds), time.Since(began).Round(time.Second))
				}
				mu.Unlock()
			}
		}()
	}
	for i := range seeds {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	violations := 0
	var wipes, rejoins, campaigns uint64
	damaged, summarised, read := 0, 0, 0
	changed, forwarded, giveUps, noAckAsked, noAckLogged, relayed, relayGiveUps := 0, 0, 0, 0, 0, 0, 0
	gone, resyncs := 0, 0
	diskFulls, diskReopens, pubRefused := 0, 0, 0
	sheds, shedBytes := 0, 0
	for i, o := range results {
		if o.err == nil {
			wipes, rejoins = wipes+o.res.RaftWipes, rejoins+o.res.RaftRejoins
			damaged, summarised, read = damaged+o.res.SummariesDamaged, summarised+o.res.SegmentsSummarised, read+o.res.SegmentsRead
			changed += o.res.MembersChanged
			campaigns += o.res.RaftLinkCampaigns
			forwarded, giveUps = forwarded+o.res.Forwarded, giveUps+o.res.ForwardGiveUps
			noAckAsked, noAckLogged = noAckAsked+o.res.NoAckAsked, noAckLogged+o.res.NoAckLogged
			relayed, relayGiveUps = relayed+o.res.Relayed, relayGiveUps+o.res.RelayGiveUps
			gone, resyncs = gone+int(o.res.DownstreamsGone), resyncs+int(o.res.Resyncs)
			diskFulls, diskReopens, pubRefused = diskFulls+o.res.DiskFulls, diskReopens+o.res.DiskReopens, pubRefused+o.res.PubRefused
			sheds, shedBytes = sheds+o.res.Sheds, shedBytes+o.res.ShedBytes
		}
		if o.err != nil {
			fmt.Fprintf(stderr, "aerie sim: %v\n", o.err)
			return 2
		}
		if verbose {
			fmt.Fprintf(stdout, "seed %d\n%s\n", seeds[i], o.res.Plan)
			fmt.Fprintf(stdout, "published %d, delivered %d over %d sessions, %d steps, %d torn log tails repaired, %d log records trimmed, %d failed fsyncs, %d payloads read back, %d refetched from upstream, %d sideways relays, %d link-status messages, %d requests moved to the next upstream member\n",
				o.res.Published, o.res.Delivered, o.res.Sessions, o.res.Steps, o.res.TornTails, o.res.Trimmed, o.res.FsyncFailures, o.res.Fetches, o.res.Refetches, o.res.Relays, o.res.LinkStatuses, o.res.AsksMoved)
			fmt.Fprintf(stdout, "membership: %d views installed, %d connections closed by a view (%d to a hung broker), %d brokers hung, %d left gracefully (%d members reported as left by installed views)\n",
				o.res.Views, o.res.ViewDrops, o.res.RoutedAround, o.res.Hangs, o.res.Leaves, o.res.LeftInViews)
			if o.res.LeaderServes > 0 {
				fmt.Fprintf(stdout, "replicated PHB cells: %d leaders started to serve, %d Raft log compactions, %d snapshots installed (largest %d bytes), largest Raft log %d bytes (%d entries), %d disks wiped, %d members rejoined as new members\n",
					o.res.LeaderServes, o.res.RaftCompactions, o.res.RaftSnapshots, o.res.RaftSnapshotMaxBytes, o.res.RaftLogMaxBytes, o.res.RaftLogMaxEntries, o.res.RaftWipes, o.res.RaftRejoins)
			}
			if o.res.DownstreamsGone > 0 || o.res.Resyncs > 0 {
				fmt.Fprintf(stdout, "release past gone downstreams: %d downstreams judged gone, %d resyncs asked of a pubend\n",
					o.res.DownstreamsGone, o.res.Resyncs)
			}
			if o.res.DCQs > 0 {
				fmt.Fprintf(stdout, "congestion control: %d DCQs, %d rate decreases, %d queue resets, at most %d bytes queued on a capped link\n",
					o.res.DCQs, o.res.RateDecreases, o.res.QueueResets, o.res.MaxLinkQueue)
			}
			printCCE3(stdout, o.res.CCE3Phases)
			printCCWindows(stdout, o.res.CCWindows)
			if o.res.CCRecovery > 0 {
				fmt.Fprintf(stdout, "  s2 back within 2 s of the present %.1f s after b1–s2 returned\n", o.res.CCRecovery.Seconds())
			} else if o.res.CCRecovery < 0 {
				fmt.Fprintln(stdout, "  s2 did not come back within 2 s of the present while it was watched")
			}
			for _, ph := range o.res.CCPhases {
				fmt.Fprintf(stdout, "  b1–s2 capped at %.0f KB/s: %.1f events/s published (second half of the phase), at most %d KB queued on b1→s2\n",
					ph.Cap/1000, ph.Rate, ph.MaxQueue/1000)
			}
		}
		if len(o.res.Violations) > 0 {
			violations++
			fmt.Fprintf(stdout, "seed %d: %s — replay: %s\n", seeds[i], o.res.Violations[0], replay(seeds[i]))
			if verbose {
				fmt.Fprintf(stdout, "state when it stopped:\n%s", o.res.State)
			}
		}
	}
	if summarised+read > 0 {
		fmt.Fprintf(stdout, "sim: restores: %d sealed segments taken from their summaries, %d segments read whole, %d summaries damaged\n", summarised, read, damaged)
	}
	if wipes+rejoins > 0 {
		fmt.Fprintf(stdout, "sim: replicated PHB cells: %d disks wiped, %d members rejoined their cell as new members", wipes, rejoins)
		if changed > 0 {
			fmt.Fprintf(stdout, ", %d members removed from their cell's config and added back", changed)
		}
		fmt.Fprintln(stdout)
	}
	if campaigns > 0 {
		fmt.Fprintf(stdout, "sim: replicated PHB cells: %d campaigns of followers whose link to their leader closed\n", campaigns)
	}
	if forwarded > 0 {
		fmt.Fprintf(stdout, "sim: replicated PHB cells: %d publishes forwarded to a serving leader, %d forwarded clients closed for want of one\n", forwarded, giveUps)
	}
	if relayed > 0 {
		fmt.Fprintf(stdout, "sim: publishers at SHBs: %d publishes relayed up a hop, %d relayed clients given up for want of a link upstream\n", relayed, relayGiveUps)
	}
	if gone > 0 || resyncs > 0 {
		fmt.Fprintf(stdout, "sim: release past gone downstreams: %d downstreams judged gone, %d resyncs asked of a pubend\n", gone, resyncs)
	}
	if diskFulls > 0 {
		fmt.Fprintf(stdout, "sim: PHB disks full %d times: %d publishes refused, %d event logs reopened once room returned\n", diskFulls, pubRefused, diskReopens)
	}
	if sheds > 0 {
		fmt.Fprintf(stdout, "sim: brokers shed their caches %d times (as over a memory budget): %d payload bytes shed at once (brokers' last incarnations)\n", sheds, shedBytes)
	}
	if noAckAsked > 0 {
		fmt.Fprintf(stdout, "sim: %d publishes asked for no ack, %d of them logged (the rest lost, as at most once allows)\n", noAckAsked, noAckLogged)
	}
	fmt.Fprintf(stdout, "sim: %d runs, %d violations\n", len(seeds), violations)
	if violations > 0 {
		return 1
	}
	return 0
}

// printCCE3 prints the phases of Gryphon CC §5 E3 (--topology cc-e3): what
// the pubend published and each SHB received in the second half of each.
func printCCE3(out io.Writer, phases []sim.CCE3Phase) {
	for i, ph := range phases {
		fmt.Fprintf(out, "  phase %d, %s: %.1f events/s published; received at s1–s5 %.1f %.1f %.1f %.1f %.1f (second half of the phase); at most %d KB queued on a link, %d queue resets\n",
			i+1, ph.Name, ph.Published, ph.Delivered[0], ph.Delivered[1], ph.Delivered[2], ph.Delivered[3], ph.Delivered[4], ph.MaxQueue/1000, ph.Resets)
	}
}
