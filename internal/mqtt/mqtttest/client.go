// Package mqtttest is a raw MQTT 3.1.1 and 5 client for tests: it writes
// exactly the packets a test asks for (also ones a well-behaved client
// library would never send) and reads back every packet, so that tests
// can check reason codes and properties. It uses mochi's packet codec.
package mqtttest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

// Client is one raw MQTT connection.
type Client struct {
	nc      net.Conn
	r       *bufio.Reader
	version byte
	nextID  uint16
	// Connack is the server's answer to CONNECT.
	Connack packets.Packet
}

// Dial connects and sends CONNECT (version 4 is 3.1.1, 5 is MQTT 5),
// returning once the CONNACK is read (whatever its reason code: see
// Connack). mod may change the CONNECT packet before it is sent.
func Dial(addr, clientID string, version byte, mod func(*packets.Packet)) (*Client, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c := &Client{nc: nc, r: bufio.NewReader(nc), version: version}
	name := []byte("MQTT")
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: version,
		Connect:         packets.ConnectParams{ProtocolName: name, ClientIdentifier: clientID, Clean: true, Keepalive: 30},
	}
	if mod != nil {
		mod(&pk)
	}
	if err := c.Write(pk); err != nil {
		nc.Close()
		return nil, err
	}
	if c.Connack, err = c.Read(5 * time.Second); err != nil {
		nc.Close()
		return nil, fmt.Errorf("reading CONNACK: %w", err)
	}
	if c.Connack.FixedHeader.Type != packets.Connack {
		nc.Close()
		return nil, fmt.Errorf("got %s, want CONNACK", packets.PacketNames[c.Connack.FixedHeader.Type])
	}
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() { c.nc.Close() }

// WriteRaw writes bytes as they are (malformed packets).
func (c *Client) WriteRaw(b []byte) error {
	_, err := c.nc.Write(b)
	return err
}

// Write encodes and writes pk.
func (c *Client) Write(pk packets.Packet) error {
	pk.ProtocolVersion = c.version
	var buf bytes.Buffer
	var err error
	switch pk.FixedHeader.Type {
	case packets.Connect:
		err = pk.ConnectEncode(&buf)
	case packets.Publish:
		err = pk.PublishEncode(&buf)
	case packets.Puback:
		err = pk.PubackEncode(&buf)
	case packets.Pubrec:
		err = pk.PubrecEncode(&buf)
	case packets.Pubrel:
		err = pk.PubrelEncode(&buf)
	case packets.Pubcomp:
		err = pk.PubcompEncode(&buf)
	case packets.Subscribe:
		err = pk.SubscribeEncode(&buf)
	case packets.Unsubscribe:
		err = pk.UnsubscribeEncode(&buf)
	case packets.Disconnect:
		err = pk.DisconnectEncode(&buf)
	case packets.Pingreq:
		err = pk.PingreqEncode(&buf)
	default:
		err = fmt.Errorf("mqtttest: cannot write packet type %d", pk.FixedHeader.Type)
	}
	if err != nil {
		return err
	}
	_, err = c.nc.Write(buf.Bytes())
	return err
}

// Read reads the next packet, waiting at most d; io.EOF when the server
// closed the connection.
func (c *Client) Read(d time.Duration) (packets.Packet, error) {
	c.nc.SetReadDeadline(time.Now().Add(d))
	var pk packets.Packet
	b, err := c.r.ReadByte()
	if err != nil {
		return pk, err
	}
	if err := pk.FixedHeader.Decode(b); err != nil {
		return pk, err
	}
	n, _, err := packets.DecodeLength(c.r)
	if err != nil {
		return pk, err
	}
	pk.FixedHeader.Remaining = n
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return pk, err
	}
	pk.ProtocolVersion = c.version
	switch pk.FixedHeader.Type {
	case packets.Connack:
		err = pk.ConnackDecode(body)
	case packets.Publish:
		err = pk.PublishDecode(body)
	case packets.Puback:
		err = pk.PubackDecode(body)
	case packets.Pubrec:
		err = pk.PubrecDecode(body)
	case packets.Pubrel:
		err = pk.PubrelDecode(body)
	case packets.Pubcomp:
		err = pk.PubcompDecode(body)
	case packets.Suback:
		err = pk.SubackDecode(body)
	case packets.Unsuback:
		err = pk.UnsubackDecode(body)
	case packets.Disconnect:
		err = pk.DisconnectDecode(body)
	case packets.Pingresp:
	default:
		err = fmt.Errorf("mqtttest: unexpected packet type %d", pk.FixedHeader.Type)
	}
	return pk, err
}

// ReadType reads packets until one of type typ, dropping the others.
func (c *Client) ReadType(typ byte, d time.Duration) (packets.Packet, error) {
	deadline := time.Now().Add(d)
	for {
		pk, err := c.Read(time.Until(deadline))
		if err != nil {
			return pk, err
		}
		if pk.FixedHeader.Type == typ {
			return pk, nil
		}
	}
}

func (c *Client) id() uint16 {
	c.nextID++
	if c.nextID == 0 {
		c.nextID = 1
	}
	return c.nextID
}

// Publish writes a PUBLISH and returns its packet id (0 at QoS 0).
func (c *Client) Publish(topic string, qos byte, payload []byte, user ...packets.UserProperty) (uint16, error) {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos}, TopicName: topic, Payload: payload}
	pk.Properties.User = user
	if qos > 0 {
		pk.PacketID = c.id()
	}
	return pk.PacketID, c.Write(pk)
}

// Subscribe writes a SUBSCRIBE for filters at qos and returns the SUBACK.
func (c *Client) Subscribe(qos byte, user []packets.UserProperty, filters ...string) (packets.Packet, error) {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: c.id()}
	pk.Properties.User = user
	for _, f := range filters {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: f, Qos: qos})
	}
	if err := c.Write(pk); err != nil {
		return pk, err
	}
	return c.ReadType(packets.Suback, 30*time.Second)
}

// Send writes an acknowledgement of type typ (PUBACK, PUBREC, PUBREL,
// PUBCOMP) for pid.
func (c *Client) Send(typ byte, pid uint16) error {
	fh := packets.FixedHeader{Type: typ}
	if typ == packets.Pubrel {
		fh.Qos = 1 // [MQTT-3.6.1-1]
	}
	return c.Write(packets.Packet{FixedHeader: fh, PacketID: pid})
}

// Ack acknowledges a QoS 1 delivery.
func (c *Client) Ack(pid uint16) error {
	return c.Write(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: pid})
}
