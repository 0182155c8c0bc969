package shell

// owners maps a publisher or subscription name to the client connection
// that owns it. The broker asks it for every event (a publish, its ack, a
// delivery) and consecutive questions nearly always name one owner (the
// publishes of a PublishRun, their acks, a subscriber's deliveries), so
// the last answer is kept beside the map: a compare of the name, not a
// hash of it. Every change to the map forgets that answer. The name kept
// may view a frame's memory (a publish's), which it then keeps alive: one
// frame or slab at most.
type owners[K ~string] struct {
	m     map[K]ClientID
	last  K
	lastC ClientID
	has   bool // last and lastC hold an answer
}

func newOwners[K ~string]() owners[K] { return owners[K]{m: map[K]ClientID{}} }

func (o *owners[K]) get(k K) (ClientID, bool) {
	if o.has && k == o.last {
		return o.lastC, true
	}
	c, ok := o.m[k]
	if ok {
		o.last, o.lastC, o.has = k, c, true
	}
	return c, ok
}

func (o *owners[K]) set(k K, c ClientID) {
	o.m[k] = c
	o.has = false
}

func (o *owners[K]) delete(k K) {
	delete(o.m, k)
	o.has = false
}

// deleteOwnedBy forgets every name c owns (its connection closed).
func (o *owners[K]) deleteOwnedBy(c ClientID) {
	for k, owner := range o.m {
		if owner == c {
			delete(o.m, k)
		}
	}
	o.has = false
}
