// Package pki is aerie's TLS plumbing: it loads a broker's certificate, key
// and the network's CA into crypto/tls configurations (mutual TLS between
// brokers, TLS towards clients), checks them at start so that a broker
// asked to run TLS never starts without it, and issues the development
// certificates of `aerie certs` and `aerie dev --tls`.
//
// Names: a broker's certificate carries its broker id as a DNS name (and
// its listen and client hosts): a peer on a broker port must present a
// certificate with the broker id it claims in its Hello (PeerName). The
// client certificate of `aerie certs` is named "client".
package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Files names the PEM files of one broker: the network's CA and the
// broker's own certificate and key.
type Files struct {
	CA, Cert, Key string
}

// Broker is a broker's TLS material, loaded and checked.
type Broker struct {
	ID   string
	cert tls.Certificate
	pool *x509.CertPool
}

// LoadBroker reads and checks a broker's files: each must exist and parse,
// the key must match the certificate, the certificate must be signed by the
// CA, valid now, and name the broker id. now is the time of the check.
func LoadBroker(id string, f Files, now time.Time) (*Broker, error) {
	pool, err := LoadCA(f.CA)
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("tls_cert %s, tls_key %s: %w", f.Cert, f.Key, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls_cert %s: %w", f.Cert, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("tls_cert %s does not verify against the [tls] ca %s: %w", f.Cert, f.CA, err)
	}
	if !slices.Contains(leaf.DNSNames, id) {
		return nil, fmt.Errorf("tls_cert %s names %s, not broker %q: peers check that a broker's certificate names its id (make one with `aerie certs`)", f.Cert, names(leaf), id)
	}
	return &Broker{ID: id, cert: cert, pool: pool}, nil
}

// LoadCA reads a PEM file of CA certificates.
func LoadCA(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("[tls] ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("[tls] ca %s: no PEM certificate in it", file)
	}
	return pool, nil
}

// Listener is the configuration of the broker port: a peer must present a
// certificate signed by the CA (mutual TLS). Its name is checked after the
// Hello, against the id the peer claims (PeerName).
func (b *Broker) Listener() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{b.cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: b.pool}
}

// Dialer is the configuration for dialing neighbour broker peer: its
// certificate must be signed by the CA and name peer; ours goes with it.
func (b *Broker) Dialer(peer string) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{b.cert}, RootCAs: b.pool, ServerName: peer}
}

// Clients is the configuration of the client port: TLS, with a client
// certificate optional (verified against the CA when one is presented).
func (b *Broker) Clients() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{b.cert},
		ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: b.pool}
}

// PeerName checks that the verified certificate of a connection names the
// broker id its peer claims in its Hello.
func PeerName(st tls.ConnectionState, id string) error {
	if len(st.PeerCertificates) == 0 {
		return errors.New("no client certificate")
	}
	leaf := st.PeerCertificates[0]
	if !slices.Contains(leaf.DNSNames, id) {
		return fmt.Errorf("certificate names %s, not broker %q", names(leaf), id)
	}
	return nil
}

func names(c *x509.Certificate) string {
	ns := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		ns = append(ns, ip.String())
	}
	if len(ns) == 0 {
		return "no name (CN " + c.Subject.CommonName + ")"
	}
	return "[" + strings.Join(ns, " ") + "]"
}

// ClientFiles are a client's TLS files: the CA to trust (required for TLS)
// and an optional certificate and key.
type ClientFiles struct {
	CA, Cert, Key string
}

// Client returns the client configuration for files (nil, nil when no CA
// is given: plain TCP). The client sets ServerName per address dialed: the
// broker's certificate must name the host it is reached by.
func Client(f ClientFiles) (*tls.Config, error) {
	if f.CA == "" {
		if f.Cert != "" || f.Key != "" {
			return nil, errors.New("--tls-cert and --tls-key need --tls-ca (the CA that signed the brokers' certificates)")
		}
		return nil, nil
	}
	b, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", f.CA)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if f.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", f.Cert, f.Key, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// decodePEM returns the DER bytes of the first block of type typ.
func decodePEM(b []byte, typ string) ([]byte, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, fmt.Errorf("no %s PEM block", typ)
		}
		if blk.Type == typ {
			return blk.Bytes, nil
		}
	}
}
