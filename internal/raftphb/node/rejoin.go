package node

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/raftphb/raftlog"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// A member that lost its Raft state rejoins the cell as a new member
// (raftphb's rejoin.go has the why). Its generation is recorded in the
// file raft.gen (absent: 0) and names its Raft log's directory: raft for
// generation 0 (where a member always kept it), raft.N for N. Rejoining
// empties the new generation's directory (a crash may have left one),
// switches raft.gen atomically and then empties the old one, so a crash
// leaves the member under one generation or the other, never a Raft log
// of one generation under the id of another. The pubend store stays: it
// holds only committed batches, which every generation shares, and the
// leader's snapshot completes or replaces it.
const raftGenFile = "raft.gen"

// raftDir returns the directory of generation gen's Raft log.
func raftDir(data string, gen uint64) string {
	if gen == 0 {
		return path.Join(data, "raft")
	}
	return path.Join(data, fmt.Sprintf("raft.%d", gen))
}

// removeOtherRaftLogs empties the Raft log directories of generations
// other than gen (a rejoin that a crash interrupted).
func removeOtherRaftLogs(fsys vfs.FS, dir string, gen uint64) error {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("raftphb: %w", err)
	}
	for _, name := range names {
		g, ok := uint64(0), name == "raft"
		if rest, found := strings.CutPrefix(name, "raft."); found {
			n, err := strconv.ParseUint(rest, 10, 64)
			g, ok = n, err == nil && n > 0
		}
		if ok && g != gen {
			if err := emptyDir(fsys, path.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// emptyDir removes the files of dir, durably.
func emptyDir(fsys vfs.FS, dir string) error {
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("raftphb: empty %s: %w", dir, err)
	}
	for _, name := range names {
		if err := fsys.Remove(path.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("raftphb: empty %s: %w", dir, err)
		}
	}
	if len(names) > 0 {
		if err := fsys.SyncDir(dir); err != nil {
			return fmt.Errorf("raftphb: empty %s: %w", dir, err)
		}
	}
	return nil
}

// rejoin replaces the member's Raft log and replica by new ones under the
// generation the replica asked for: an empty log, and a replica with no
// configuration that asks the cell to admit it. Called between Readies.
func (n *Node) rejoin() error {
	lost := *n.rejoining
	if n.serving || n.sh != nil {
		n.lost(raftphb.Lost{Term: n.rep.Status().Term})
	}
	gen := max(lost.Gen, n.gen+1)
	n.dropOutgoing()
	if n.xfer.in != nil {
		n.abandonIn()
	}
	if err := n.rlog.Close(); err != nil {
		return fmt.Errorf("raftphb: rejoin: close the Raft log: %w", err)
	}
	dir := raftDir(n.cfg.Dir, gen)
	if err := emptyDir(n.cfg.FS, dir); err != nil {
		return err
	}
	if err := writeGen(n.cfg.FS, n.cfg.Dir, raftGenFile, gen); err != nil {
		return fmt.Errorf("raftphb: rejoin: record generation %d: %w", gen, err)
	}
	if err := emptyDir(n.cfg.FS, raftDir(n.cfg.Dir, n.gen)); err != nil {
		return err
	}
	rl, st, _, err := raftlog.Open(n.cfg.FS, dir, n.cfg.LogOptions)
	if err != nil {
		return fmt.Errorf("raftphb: rejoin: %w", err)
	}
	cfg := n.cfg.Replica
	cfg.ID = raftphb.MemberID(n.slot, gen)
	cfg.Peers = n.rep.Peers() // as the cell's config stands now (SetPeers), not as it stood at Open
	rep, err := raftphb.New(cfg, st)
	if err != nil {
		rl.Close()
		return fmt.Errorf("raftphb: rejoin: %w", err)
	}
	n.cfg.Replica, n.rep, n.rlog, n.gen = cfg, rep, rl, gen
	n.durableTerm, n.durableVote, n.logSynced = 0, 0, 0
	n.inStore, n.synced = 0, 0
	n.rejoining = nil
	n.rejoins++
	n.logStats = rl.Stats()
	lost.Gen = gen
	n.events = append(n.events, Event{Kind: EventRejoin, Rejoin: lost})
	return nil
}
