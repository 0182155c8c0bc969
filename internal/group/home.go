package group

import "hash/fnv"

// Home picks the home of group name among candidates (broker ids): the
// rendezvous hash of the name over them, so every broker that has the same
// list picks the same one, and a list that loses or gains a broker moves
// only the groups homed there. It returns -1 for an empty list.
func Home(name string, candidates []string) int {
	best, bestScore := -1, uint64(0)
	for i, c := range candidates {
		h := fnv.New64a()
		h.Write([]byte(name))
		h.Write([]byte{0})
		h.Write([]byte(c))
		if s := h.Sum64(); best < 0 || s > bestScore || (s == bestScore && c < candidates[best]) {
			best, bestScore = i, s
		}
	}
	return best
}
