package mqtt

import "github.com/mochi-mqtt/server/v2/packets"

// outAliases are the topic aliases this broker has set on a connection to
// an MQTT 5 client that takes them (its CONNECT's Topic Alias Maximum):
// the first PUBLISH of a topic carries the topic and a new alias, the
// later ones the alias alone (MQTT 5 §3.3.2.3.4). Aliases go to the first
// topics delivered, until the client's maximum; a mapping lives as long
// as its connection, so every connection starts afresh and what a session
// sends again after a reconnection carries its topic.
type outAliases struct {
	max    uint16
	topics map[string]uint16
}

// apply gives pk its alias: the alias alone for a topic already mapped,
// the topic and a new alias while there is room (taken by commit once the
// packet is written), the topic alone otherwise. It returns the alias to
// commit, 0 for none.
func (a *outAliases) apply(pk *packets.Packet) uint16 {
	if a.max == 0 || pk.TopicName == "" {
		return 0
	}
	if id, ok := a.topics[pk.TopicName]; ok {
		pk.Properties.TopicAlias, pk.Properties.TopicAliasFlag = id, true
		pk.TopicName = ""
		return 0
	}
	if len(a.topics) >= int(a.max) {
		return 0
	}
	id := uint16(len(a.topics) + 1)
	pk.Properties.TopicAlias, pk.Properties.TopicAliasFlag = id, true
	return id
}

// commit records that the PUBLISH setting alias id for topic reached
// the connection: only then may a later one use the alias alone.
func (a *outAliases) commit(topic string, id uint16) {
	if id == 0 {
		return
	}
	if a.topics == nil {
		a.topics = map[string]uint16{}
	}
	a.topics[topic] = id
}
