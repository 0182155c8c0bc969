package vfs

import (
	"math/rand/v2"
	"slices"
)

// Op names an operation that MemFS.InjectError can make fail.
type Op int

const (
	OpWrite   Op = iota + 1 // File.Write
	OpSync                  // File.Sync
	OpSyncDir               // FS.SyncDir
)

func (o Op) String() string {
	switch o {
	case OpWrite:
		return "write"
	case OpSync:
		return "sync"
	case OpSyncDir:
		return "syncdir"
	}
	return "unknown op"
}

type fault struct {
	op   Op
	name string // clean name; "" matches every name
	err  error
}

// InjectError makes the next op on name fail with err (wrapped in an
// *fs.PathError, so errors.Is(returned, err) holds). An empty name matches
// any file (for OpSyncDir: any directory). Each injected error fires once;
// several can be queued and fire in the order they were injected. A failed
// Write writes nothing; a failed Sync makes nothing durable. File handles
// match by the name they were opened with. Pending faults survive Crash.
func (m *MemFS) InjectError(op Op, name string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if name != "" {
		name = clean(name)
	}
	m.faults = append(m.faults, fault{op: op, name: name, err: err})
}

// SetFull models a full disk while err is not nil (syscall.ENOSPC,
// typically), until SetFull(nil): a Write appends half of its bytes and
// fails with err (a short write), a Sync of a file with unsynced bytes
// fails with err and makes nothing durable, and a Truncate that grows
// fails. Creating, removing and renaming names, shrinking files and
// syncing directories go on working, as on a real full disk.
//
// A Sync that failed this way marks the file's bytes past its durable
// prefix as lost for good: a later Sync that succeeds does not make them
// durable (Crash drops them), as on kernels that mark the pages of a
// failed write-back clean. Only a Truncate below them clears the mark.
func (m *MemFS) SetFull(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.full = err
}

// takeFault pops the first pending fault matching op and name. It must be
// called with m.mu held.
func (m *MemFS) takeFault(op Op, name string) error {
	for i, f := range m.faults {
		if f.op == op && (f.name == "" || f.name == name) {
			m.faults = slices.Delete(m.faults, i, i+1)
			return f.err
		}
	}
	return nil
}

// Crash models a power loss followed by a reboot:
//   - the namespace reverts to the durable one (see MemFS);
//   - every surviving file keeps its synced bytes plus a prefix, of a length
//     drawn uniformly from rng, of its unsynced bytes, so a torn tail (half a
//     record) is possible;
//   - every File handle opened before the crash fails with ErrCrashed.
//
// For a given state and rng sequence the outcome is deterministic: files are
// visited in name order.
func (m *MemFS) Crash(rng *rand.Rand) { m.CrashWith(func(string) *rand.Rand { return rng }) }

// WriteBack makes durable every byte written to the files whose names
// keep says, as a kernel's writeback does within seconds of the writes,
// fsync or not: a crash after it keeps them whole, under the names that
// were durable. Unlike File.Sync it draws no fault.
func (m *MemFS) WriteBack(keep func(name string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for n, node := range m.files {
		if keep(n) && node.lost == 0 {
			node.synced = len(node.data)
		}
	}
}

// CrashWith is Crash drawing the bytes each file keeps from the generator
// pick returns for its name: a simulator that adds files of a new kind
// draws for them from a generator of their own, and every other file
// crashes as it did before they existed.
func (m *MemFS) CrashWith(pick func(name string) *rand.Rand) {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.durable))
	for n := range m.durable {
		names = append(names, n)
	}
	slices.Sort(names)
	files := make(map[string]*memNode, len(names))
	seen := make(map[*memNode]bool, len(names))
	for _, n := range names {
		node := m.durable[n]
		files[n] = node
		if seen[node] {
			continue // same file durable under two names (rename across dirs)
		}
		seen[node] = true
		keep := node.synced + pick(n).IntN(len(node.data)-node.synced+1)
		if node.lost > 0 {
			keep = min(keep, node.lost-1)
			node.lost = 0
		}
		node.data = node.data[:keep]
		node.synced = keep
	}
	m.files = files
	m.gen++
}

// Kill models a process killed without a power loss (kill -9): the kernel
// keeps every byte written and every name made, so all of it survives as
// it is; every File handle opened before fails with ErrCrashed.
func (m *MemFS) Kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	durable := make(map[string]*memNode, len(m.files))
	for n, node := range m.files {
		node.synced = len(node.data)
		durable[n] = node
	}
	m.durable = durable
	m.gen++
}
