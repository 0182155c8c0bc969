package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority that can issue certificates.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	PEM  []byte // the certificate
}

// Lifetimes of the development certificates.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 2 * 365 * 24 * time.Hour
)

// NewCA makes a self-signed development CA, valid from now on.
func NewCA(name string, now time.Time) (*CA, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name, Organization: []string{"aerie development"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caLifetime),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := keyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, keyPEM, nil
}

// LoadCAFiles reads a CA certificate and its key (ca.pem, ca-key.pem).
func LoadCAFiles(certFile, keyFile string) (*CA, error) {
	cb, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	der, err := decodePEM(cb, "CERTIFICATE")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	kder, err := decodePEM(kb, "PRIVATE KEY")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kder)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: not a signing key", keyFile)
	}
	return &CA{Cert: cert, Key: signer, PEM: cb}, nil
}

// Issue makes a certificate signed by ca for names (DNS names, or IP
// addresses), usable as a TLS server and client certificate: a broker is
// both on its links. It returns the certificate and key in PEM.
func (ca *CA) Issue(cn string, names []string, now time.Time) (certPEM, keyPEMBytes []byte, err error) {
	return ca.issue(cn, names, now, now.Add(leafLifetime))
}

func (ca *CA) issue(cn string, names []string, from, until time.Time) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn, Organization: []string{"aerie development"}},
		NotBefore: from.Add(-time.Hour), NotAfter: until,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if n != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), kp, nil
}

// IssueExpired is Issue for a certificate that expired an hour before now,
// for tests of expiry.
func (ca *CA) IssueExpired(cn string, names []string, now time.Time) ([]byte, []byte, error) {
	return ca.issue(cn, names, now.Add(-48*time.Hour), now.Add(-time.Hour))
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

// BrokerNames is what a broker's certificate names: its id and the hosts
// of its addresses.
type BrokerNames struct {
	ID    string
	Addrs []string // host:port (listen, clients); the hosts become names
}

// WriteDev writes a development PKI into dir, as `aerie certs` does:
// ca.pem and ca-key.pem, <id>.pem and <id>-key.pem for every broker (named
// by its id and the hosts of its addresses), client.pem and client-key.pem.
// An existing CA in dir is reused, so that certificates added later (a new
// broker) are signed by the CA the others trust. Keys are written 0600.
func WriteDev(dir string, brokers []BrokerNames, now time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	caCert, caKey := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	ca, err := LoadCAFiles(caCert, caKey)
	switch {
	case errors.Is(err, os.ErrNotExist):
		var kp []byte
		if ca, kp, err = NewCA("aerie development CA", now); err != nil {
			return err
		}
		if err := write(caCert, ca.PEM, 0o644); err != nil {
			return err
		}
		if err := write(caKey, kp, 0o600); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("existing CA in %s: %w", dir, err)
	}
	issue := func(name string, names []string) error {
		c, k, err := ca.Issue(name, names, now)
		if err != nil {
			return err
		}
		if err := write(filepath.Join(dir, name+".pem"), c, 0o644); err != nil {
			return err
		}
		return write(filepath.Join(dir, name+"-key.pem"), k, 0o600)
	}
	for _, b := range brokers {
		if b.ID == "client" || b.ID == "ca" {
			return fmt.Errorf("broker id %q would overwrite %s.pem: rename the broker", b.ID, b.ID)
		}
	}
	for _, b := range brokers {
		names := []string{b.ID}
		for _, a := range b.Addrs {
			host, _, err := net.SplitHostPort(a)
			if err != nil || host == "" {
				continue
			}
			if !contains(names, host) {
				names = append(names, host)
			}
		}
		if err := issue(b.ID, names); err != nil {
			return err
		}
	}
	return issue("client", []string{"client"})
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// write replaces file atomically with data.
func write(file string, data []byte, mode os.FileMode) error {
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}
