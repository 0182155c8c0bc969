package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/raftphb/raftlog"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// A member whose Raft log or pubend store is corrupt at start (a frame
// with a bad checksum that is not a torn tail, a Raft log whose records do
// not make a log, a store that ends before its Raft log's snapshot) has
// lost state the cell relies on, as surely as one whose disk was wiped:
// the damaged part may hide entries it acknowledged, a term or a vote, and
// what follows it cannot be trusted either. Restarting under its id with
// what it can still read would let it vote with a log that lacks
// committed entries (Raft thesis §4), so Open treats the whole member
// state as lost: it moves the Raft log and the store aside, for the
// operator, into DATA/raft.corrupt-<unix time>, and starts the member as
// the next generation of its slot, with an empty log, an empty store and
// no configuration — the state a wiped member reaches once it notices
// (rejoin.go). It then neither votes nor campaigns: it asks the cell's
// serving leader to admit it as a learner, catches up from the leader's
// store image, and is promoted once it holds everything committed.
//
// The guard is the wiped member's: only a serving leader of the existing
// configuration admits a new member, and it needs a majority of that
// configuration's voters, each with its own intact log. If a majority of
// the cell found its state corrupt at once, every one of them waits to be
// admitted and no leader can be elected: the cell stops rather than form
// a new one without the committed log.
//
// A torn tail is not corruption: eventlog.Open truncates a bad frame at
// the end of the last segment, past what the log's synced marks say was
// fsynced, that no valid frame follows (a write a crash cut short, never
// fsynced, so never acknowledged), and the member keeps its id. A bad
// last frame within the synced bytes is corruption like any other.
//
// The move is made safe against a crash by a marker, DATA/raft.corrupt,
// written (atomically) before the first file moves: it names the aside
// directory and the new generation, and Open finishes an interrupted move
// before it reads anything else, so no restart ever opens what is left of
// the corrupt state under the old id.
const (
	corruptMarker = "raft.corrupt"
	corruptPrefix = "raft.corrupt-"
)

// Corruption is what Open found and did about it.
type Corruption struct {
	// Err is the corruption Open found.
	Err error
	// Aside is the directory (in the member's data directory) that holds
	// the member's Raft log and store as they were.
	Aside string
	// From is the member's Raft id before; Gen the generation it rejoins
	// under.
	From, Gen uint64
}

func (c *Corruption) String() string {
	return fmt.Sprintf("its Raft state is corrupt (%v): moved aside to %s; it rejoins its cell as Raft member %d (was %d), "+
		"without a vote until the serving leader admits it and it has caught up",
		c.Err, c.Aside, raftphb.MemberID(raftphb.Slot(c.From), c.Gen), c.From)
}

// isCorrupt reports whether err says that the member's disks hold data
// that is not a valid Raft log or store (not an I/O error: the disk
// answered, and what it returned is wrong).
func isCorrupt(err error) bool {
	return errors.Is(err, eventlog.ErrCorrupt) || errors.Is(err, raftlog.ErrCorrupt)
}

// isStateName reports whether name, in a member's data directory, is part
// of its Raft state: a Raft log (raft, raft.N), the generation files, a
// store (pubends, pubends.N) or its snapshot.
func isStateName(name string) bool {
	if name == corruptMarker || strings.HasPrefix(name, corruptPrefix) {
		return false
	}
	base := strings.TrimSuffix(name, ".tmp")
	for _, p := range []string{"raft", "pubends"} {
		if base == p || base == p+".gen" || base == p+".snapshot" {
			return true
		}
		rest, ok := strings.CutPrefix(base, p+".")
		if !ok {
			continue
		}
		rest = strings.TrimSuffix(rest, ".snapshot")
		if _, err := strconv.ParseUint(rest, 10, 64); err == nil {
			return true
		}
	}
	return false
}

// setAside moves the member's state aside after Open found it corrupt
// (found) and records the generation it rejoins under.
func setAside(cfg Config, slot uint64, found error) (*Corruption, error) {
	old, gerr := readGen(cfg.FS, cfg.Dir, raftGenFile)
	gen := old + 1
	if gerr != nil {
		gen = 1 // raft.gen itself is corrupt: the directories tell
	}
	names, err := cfg.FS.ReadDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("raftphb: %w", err)
	}
	taken := map[string]bool{}
	for _, name := range names {
		taken[name] = true
		if rest, ok := strings.CutPrefix(name, "raft."); ok {
			if g, err := strconv.ParseUint(rest, 10, 64); err == nil {
				gen = max(gen, g+1)
			}
		}
	}
	now := time.Now
	if cfg.Now != nil {
		now = cfg.Now
	}
	aside := fmt.Sprintf("%s%d", corruptPrefix, now().Unix())
	for k := 2; taken[aside]; k++ {
		aside = fmt.Sprintf("%s%d.%d", corruptPrefix, now().Unix(), k)
	}
	if cfg.Mutation.has(MutCorruptBlank) {
		gen = old
	}
	c := &Corruption{Err: found, Aside: aside, From: raftphb.MemberID(slot, old), Gen: gen}
	if gerr != nil {
		c.From = raftphb.MemberID(slot, 0)
	}
	frames := [][]byte{[]byte(aside), binary.AppendUvarint(nil, gen), binary.AppendUvarint(nil, c.From), []byte(found.Error())}
	if err := eventlog.WriteSnapshot(cfg.FS, path.Join(cfg.Dir, corruptMarker), frames); err != nil {
		return nil, fmt.Errorf("raftphb: record the corrupt Raft state: %w", err)
	}
	return c, finishAside(cfg, c)
}

// resumeAside finishes a move that a crash interrupted (nil: none was
// under way).
func resumeAside(cfg Config) (*Corruption, error) {
	frames, err := eventlog.ReadSnapshot(cfg.FS, path.Join(cfg.Dir, corruptMarker))
	if err != nil {
		return nil, fmt.Errorf("raftphb: %w", err)
	}
	if len(frames) == 0 {
		return nil, nil
	}
	bad := fmt.Errorf("%w: %s", eventlog.ErrCorrupt, path.Join(cfg.Dir, corruptMarker))
	if len(frames) != 4 || !strings.HasPrefix(string(frames[0]), corruptPrefix) || strings.Contains(string(frames[0]), "/") {
		return nil, bad
	}
	gen, k := binary.Uvarint(frames[1])
	from, k2 := binary.Uvarint(frames[2])
	if k <= 0 || k2 <= 0 {
		return nil, bad
	}
	c := &Corruption{Err: errors.New(string(frames[3])), Aside: string(frames[0]), From: from, Gen: gen}
	return c, finishAside(cfg, c)
}

// finishAside moves every file of the member's state into c.Aside (a
// directory's files into a directory of the same name there), then
// writes the new generation and removes the marker. Each step can be
// repeated after a crash.
func finishAside(cfg Config, c *Corruption) error {
	fsys, aside := cfg.FS, path.Join(cfg.Dir, c.Aside)
	if err := fsys.MkdirAll(aside); err != nil {
		return fmt.Errorf("raftphb: %w", err)
	}
	names, err := fsys.ReadDir(cfg.Dir)
	if err != nil {
		return fmt.Errorf("raftphb: %w", err)
	}
	for _, name := range names {
		if !isStateName(name) {
			continue
		}
		src := path.Join(cfg.Dir, name)
		files, err := fsys.ReadDir(src)
		if err != nil {
			// A file. raft.gen is the new one once written (a crash
			// before the marker's removal): it stays.
			if name == raftGenFile {
				if g, err := readGen(fsys, cfg.Dir, raftGenFile); err == nil && g == c.Gen {
					continue
				}
			}
			if err := fsys.Rename(src, path.Join(aside, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("raftphb: move %s aside: %w", src, err)
			}
			continue
		}
		if len(files) == 0 {
			continue
		}
		dst := path.Join(aside, name)
		if err := fsys.MkdirAll(dst); err != nil {
			return fmt.Errorf("raftphb: %w", err)
		}
		for _, f := range files {
			if err := fsys.Rename(path.Join(src, f), path.Join(dst, f)); err != nil {
				return fmt.Errorf("raftphb: move %s aside: %w", path.Join(src, f), err)
			}
		}
		if err := syncDirs(fsys, src, dst); err != nil {
			return err
		}
	}
	if err := syncDirs(fsys, cfg.Dir, aside); err != nil {
		return err
	}
	if err := writeGen(fsys, cfg.Dir, raftGenFile, c.Gen); err != nil {
		return fmt.Errorf("raftphb: record generation %d: %w", c.Gen, err)
	}
	if err := fsys.Remove(path.Join(cfg.Dir, corruptMarker)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("raftphb: %w", err)
	}
	return syncDirs(fsys, cfg.Dir)
}

func syncDirs(fsys vfs.FS, dirs ...string) error {
	for _, d := range dirs {
		if err := fsys.SyncDir(d); err != nil {
			return fmt.Errorf("raftphb: sync %s: %w", d, err)
		}
	}
	return nil
}
