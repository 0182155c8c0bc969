package mqtt

import (
	"errors"
	"slices"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/msg"
)

// TestNotAuthorized: a client (here anonymous, as [anonymous] admits it)
// whose permissions refuse a filter gets SUBACK 0x87 (MQTT 5) or 0x80
// (3.1.1) for it, the others granted, and its connection stays; a QoS 1
// publish outside them gets PUBACK 0x87.
func TestNotAuthorized(t *testing.T) {
	anon, err := auth.NewPerms("", nil, []string{"status.*"})
	if err != nil {
		t.Fatal(err)
	}
	s, h := startFakeOpts(t, func(o *Options) {
		o.Authenticate = func(user, password string) (*auth.Perms, error) {
			if user == "" && password == "" {
				return anon, nil
			}
			return nil, errors.New("bad user name or password")
		}
	}, "P1")
	for _, tc := range []struct {
		version byte
		refused byte
	}{{5, 0x87}, {4, 0x80}} {
		c := dial(t, s, "anon", tc.version)
		if err := c.Write(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: 1,
			Filters: packets.Subscriptions{{Filter: "orders/#", Qos: 1}, {Filter: "status/x", Qos: 1}}}); err != nil {
			t.Fatal(err)
		}
		r := h.request(t)
		if sub := r.m.(msg.Subscribe); sub.Pattern != "status.x" {
			t.Fatalf("reached aerie: %+v, want only status.x", sub)
		}
		h.conn(r.id).Send(msg.SubStarted{Sub: r.m.(msg.Subscribe).Sub})
		if ack := read(t, c, packets.Suback); !slices.Equal(ack.ReasonCodes, []byte{tc.refused, 1}) {
			t.Fatalf("v%d SUBACK %x, want %x 01", tc.version, ack.ReasonCodes, tc.refused)
		}
		if err := c.Write(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pingreq}}); err != nil {
			t.Fatal(err)
		}
		read(t, c, packets.Pingresp) // the connection stays
		if tc.version == 5 {
			if _, err := c.Publish("orders/1", 1, nil); err != nil {
				t.Fatal(err)
			}
			if ack := read(t, c, packets.Puback); ack.ReasonCode != 0x87 {
				t.Fatalf("PUBACK %#x, want 0x87", ack.ReasonCode)
			}
		}
		c.Close()
		down(t, h)
	}
}
