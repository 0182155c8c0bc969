package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/config"
	"github.com/aerie-mq/aerie/internal/pki"
)

// securityOptions adds TLS and users from the config to a broker's
// options: the files are read and checked now, so that a broker asked to
// run TLS either starts with it or does not start.
func securityOptions(n *config.Network, b config.Broker, base string, logger *slog.Logger, opts *broker.Options) error {
	if n.TLS != nil {
		tb, err := pki.LoadBroker(b.ID, pki.Files{CA: config.Resolve(base, n.TLS.CA), Cert: config.Resolve(base, b.TLSCert), Key: config.Resolve(base, b.TLSKey)}, time.Now())
		if err != nil {
			return fmt.Errorf("broker %s: %w", b.ID, err)
		}
		opts.TLS = tb
	}
	users, err := auth.NewUsers(n.AuthUsers())
	if err != nil {
		return err
	}
	if a := n.Anonymous; a != nil && users != nil {
		if err := users.AllowAnonymous(a.Publish, a.Subscribe); err != nil {
			return err
		}
	}
	opts.Users = users
	if users != nil && n.TLS == nil && b.Clients != "" {
		logger.Warn("the config has users but no [tls]: passwords cross the network in clear text", "broker", b.ID)
	}
	return nil
}

// clientSecurity is the security flags of every client command, and its
// log flags (the client library logs its reconnections).
type clientSecurity struct {
	ca, cert, key, user, password string
	log                           *logFlags
}

func addClientSecurity(fs *flag.FlagSet) *clientSecurity {
	s := &clientSecurity{}
	fs.StringVar(&s.ca, "tls-ca", "", "connect with TLS, trusting the brokers' certificates signed by this CA (PEM)")
	fs.StringVar(&s.cert, "tls-cert", "", "client certificate (PEM), with --tls-key")
	fs.StringVar(&s.key, "tls-key", "", "client certificate's key (PEM)")
	fs.StringVar(&s.user, "user", "", "user name, when the network has users")
	fs.StringVar(&s.password, "password", "", "password of --user (default: $AERIE_PASSWORD)")
	s.log = addLogFlags(fs, slog.LevelInfo)
	return s
}

// apply sets the client options from the flags; the client logs to
// stderr.
func (s *clientSecurity) apply(o *client.Options, stderr io.Writer) error {
	logger, err := s.log.logger(stderr)
	if err != nil {
		return err
	}
	o.Logger = logger
	cfg, err := pki.Client(pki.ClientFiles{CA: s.ca, Cert: s.cert, Key: s.key})
	if err != nil {
		return err
	}
	o.TLS = cfg
	o.User, o.Password = s.user, s.password
	if o.Password == "" {
		o.Password = os.Getenv("AERIE_PASSWORD")
	}
	if o.Password != "" && o.User == "" {
		return fmt.Errorf("a password without --user")
	}
	return nil
}

// runCerts implements `aerie certs --config FILE --out DIR`.
func runCerts(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aerie certs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	usageWith(fs, "aerie certs --config FILE --out DIR",
		"Write a development certificate authority and the TLS certificates of a network: DIR/ca.pem and "+
			"DIR/ca-key.pem, DIR/<id>.pem and DIR/<id>-key.pem for every broker of the config (named for its "+
			"addresses), and DIR/client.pem and DIR/client-key.pem for clients. A CA already in DIR is reused, so "+
			"certificates for brokers added later are signed by the same one. Point the config's [tls] ca and each "+
			"broker's tls_cert and tls_key at them, and clients' --tls-ca at ca.pem.",
		"aerie certs --config network.toml --out certs",
		"aerie certs --config network.toml --out certs   # again after adding a broker: the CA is kept")
	cfgPath := fs.String("config", "", "network config: a certificate for every broker in it")
	out := fs.String("out", "", "directory for ca.pem, ca-key.pem, <id>.pem, <id>-key.pem, client.pem, client-key.pem (an existing CA there is reused)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *cfgPath == "" || *out == "" {
		fmt.Fprintln(stderr, "aerie certs: --config and --out are required")
		return 2
	}
	n, err := config.Load(*cfgPath)
	if err != nil && !strings.Contains(err.Error(), "tls") {
		fmt.Fprintf(stderr, "aerie certs: %v\n", err)
		return 2
	}
	if n == nil { // the only problems are about certificates this command makes
		if n, err = loadIgnoringTLS(*cfgPath); err != nil {
			fmt.Fprintf(stderr, "aerie certs: %v\n", err)
			return 2
		}
	}
	var bs []pki.BrokerNames
	for _, b := range n.Brokers {
		bs = append(bs, pki.BrokerNames{ID: b.ID, Addrs: []string{b.Listen, b.Clients}})
	}
	if err := pki.WriteDev(*out, bs, time.Now()); err != nil {
		fmt.Fprintf(stderr, "aerie certs: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote a development CA and certificates for %d brokers and one client to %s\n", len(bs), *out)
	fmt.Fprintf(stdout, "in the config: [tls] ca = %q, and per broker tls_cert = \"…/<id>.pem\", tls_key = \"…/<id>-key.pem\"\n", filepath.Join(*out, "ca.pem"))
	fmt.Fprintf(stdout, "clients: --tls-ca %s [--tls-cert %s --tls-key %s]\n", filepath.Join(*out, "ca.pem"), filepath.Join(*out, "client.pem"), filepath.Join(*out, "client-key.pem"))
	return 0
}

// loadIgnoringTLS loads a config whose only problem is TLS settings that
// point at certificates not made yet: it drops [tls] and the brokers'
// tls_cert and tls_key before checking.
func loadIgnoringTLS(path string) (*config.Network, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keep []string
	inTLS := false
	for _, line := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "[") {
			inTLS = t == "[tls]"
		}
		if inTLS || strings.HasPrefix(t, "tls_cert") || strings.HasPrefix(t, "tls_key") {
			keep = append(keep, "") // keep line numbers
			continue
		}
		keep = append(keep, line)
	}
	return config.Parse([]byte(strings.Join(keep, "\n")), path)
}

// runPasswd implements `aerie passwd`: the bcrypt hash of the password
// read from stdin (its first line), for a [[user]]'s password.
func runPasswd(args []string, stdout, stderr io.Writer) int {
	return passwd(args, os.Stdin, stdout, stderr)
}

func passwd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aerie passwd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	usageWith(fs, "aerie passwd < FILE",
		"Print the bcrypt hash of the password read from stdin (its first line, without the line end), for "+
			"password = \"…\" in a [[user]] table of the network config (docs/SECURITY.md). The password is read from "+
			"stdin, never from a flag, so that it does not appear in the shell's history or the process list. A user "+
			"then connects with --user NAME and --password P, or AERIE_PASSWORD in the environment.",
		"aerie passwd < alice.password",
		"printf '%s' \"$SECRET\" | aerie passwd")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && err != io.EOF {
		fmt.Fprintf(stderr, "aerie passwd: %v\n", err)
		return 1
	}
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		fmt.Fprintln(stderr, "aerie passwd: no password on stdin")
		return 2
	}
	h, err := auth.Hash([]byte(pw))
	if err != nil {
		fmt.Fprintf(stderr, "aerie passwd: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, h)
	return 0
}

// devTLS turns TLS on for the dev network: certificates for every broker
// and a client under dir/certs, named in the config relative to it.
func devTLS(netw *config.Network, dir string) error {
	var bs []pki.BrokerNames
	for _, b := range netw.Brokers {
		bs = append(bs, pki.BrokerNames{ID: b.ID, Addrs: []string{b.Listen, b.Clients}})
	}
	if err := pki.WriteDev(filepath.Join(dir, "certs"), bs, time.Now()); err != nil {
		return err
	}
	netw.TLS = &config.TLS{CA: "certs/ca.pem"}
	for i := range netw.Brokers {
		id := netw.Brokers[i].ID
		netw.Brokers[i].TLSCert, netw.Brokers[i].TLSKey = "certs/"+id+".pem", "certs/"+id+"-key.pem"
	}
	return nil
}
