package mqtt

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/mochi-mqtt/server/v2/packets"
)

// A will survives its broker's crash (docs/MQTT.md, Wills): while its
// connection is up it is a file of Options.WillDir, written and synced
// when the session is established, removed when the will is settled (a
// DISCONNECT 0x00, published and acknowledged, or cancelled by a resumed
// session). A broker that starts and finds wills there publishes them:
// their connections ended with the crash, without DISCONNECT.

// storedWill is a will's file.
type storedWill struct {
	ClientID string
	Topic    string // the MQTT topic
	Payload  []byte
	User     [][2]string
	QoS      byte
	Retain   bool
	// The will's MQTT 5 properties (props.go), absent when not given.
	PayloadFormat *byte  `json:",omitempty"`
	Expiry        uint32 `json:",omitempty"`
	ContentType   string `json:",omitempty"`
	ResponseTopic string `json:",omitempty"`
	Correlation   []byte `json:",omitempty"`
}

// properties are the will's MQTT 5 properties.
func (sw *storedWill) properties() packets.Properties {
	p := packets.Properties{MessageExpiryInterval: sw.Expiry, ContentType: sw.ContentType,
		ResponseTopic: sw.ResponseTopic, CorrelationData: sw.Correlation}
	if sw.PayloadFormat != nil {
		p.PayloadFormat, p.PayloadFormatFlag = *sw.PayloadFormat, true
	}
	for _, u := range sw.User {
		p.User = append(p.User, packets.UserProperty{Key: u[0], Val: u[1]})
	}
	return p
}

var willSeq atomic.Uint64

// saveWill writes cl's will to a file of its own (none: no WillDir) and
// returns its path.
func (s *Server) saveWill(clientID string, w storedWill) (string, error) {
	if s.opts.WillDir == "" {
		return "", nil
	}
	if err := os.MkdirAll(s.opts.WillDir, 0o755); err != nil {
		return "", fmt.Errorf("mqtt: will directory: %w", err)
	}
	b, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("mqtt: will of %q: %w", clientID, err)
	}
	name := fmt.Sprintf("%s.%x.%d.will", escapeName(clientID), s.opts.Incarnation, willSeq.Add(1))
	path := filepath.Join(s.opts.WillDir, name)
	if err := writeSynced(path, b); err != nil {
		return "", fmt.Errorf("mqtt: will of %q: %w", clientID, err)
	}
	return path, nil
}

// writeSynced writes b to path durably: a synced temporary file renamed
// into place, and the directory synced.
func writeSynced(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// dropWill removes a settled will's file.
func (s *Server) dropWill(path string) {
	if path == "" {
		return
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		s.log.Warn("MQTT will file not removed", "path", path, "err", err)
	}
}

// storedOf is the file form of a CONNECT's will.
func storedOf(clientID string, topic string, payload []byte, p *packets.Properties, qos byte, retain bool) storedWill {
	w := storedWill{ClientID: clientID, Topic: topic, Payload: payload, QoS: qos, Retain: retain,
		Expiry: p.MessageExpiryInterval, ContentType: p.ContentType, ResponseTopic: p.ResponseTopic, Correlation: p.CorrelationData}
	if p.PayloadFormatFlag {
		w.PayloadFormat = &p.PayloadFormat
	}
	for _, u := range p.User {
		w.User = append(w.User, [2]string{u.Key, u.Val})
	}
	return w
}

// publishStoredWills publishes the wills a previous run of the broker
// left: their connections ended when it stopped without settling them.
func (s *Server) publishStoredWills() {
	if s.opts.WillDir == "" {
		return
	}
	entries, err := os.ReadDir(s.opts.WillDir)
	if err != nil {
		if !os.IsNotExist(err) {
			s.log.Warn("MQTT wills of the previous run not read", "dir", s.opts.WillDir, "err", err)
		}
		return
	}
	for _, e := range entries {
		path := filepath.Join(s.opts.WillDir, e.Name())
		if !strings.HasSuffix(e.Name(), ".will") {
			_ = os.Remove(path) // a temporary file a crash left
			continue
		}
		b, err := os.ReadFile(path)
		var sw storedWill
		if err == nil {
			err = json.Unmarshal(b, &sw)
		}
		if err != nil {
			s.log.Warn("MQTT will file unreadable: removed", "path", path, "err", err)
			s.dropWill(path)
			continue
		}
		wp := sw.properties()
		topic, err := Topic(sw.Topic)
		var w *will
		if err == nil {
			props, perr := publishProps(&wp, sw.QoS, sw.Retain)
			err = perr
			w = &will{topic: topic, props: props, payload: sw.Payload, file: path}
			if sw.Retain {
				w.retain = &retainedMsg{topic: sw.Topic, payload: sw.Payload, props: props, qos: sw.QoS}
			}
		}
		if err != nil {
			s.log.Warn("MQTT will of the previous run not publishable: removed", "client", sw.ClientID, "err", err)
			s.dropWill(path)
			continue
		}
		cl := s.srv.NewClient(nil, "aerie", sw.ClientID, true)
		s.log.Info("publishing an MQTT will left by the previous run", "client", sw.ClientID, "topic", sw.Topic)
		go s.publishWill(cl, s.state(sw.ClientID, false), w)
	}
}
