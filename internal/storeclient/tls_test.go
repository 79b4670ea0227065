package storeclient_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// TestTLSWithCAFile (issue 34): a rediss:// store whose certificate chains
// to a private CA is reached with store.tls_ca_file, and refused without
// it (the system's CAs do not know it); the password travels inside TLS.
func TestTLSWithCAFile(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := newCert(t, nil, nil, true)
	srv, srvKey := newCert(t, ca, caKey, false)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := write("ca.pem", "CERTIFICATE", ca.Raw)
	certFile := write("server.pem", "CERTIFICATE", srv.Raw)
	kb, _ := x509.MarshalECPrivateKey(srvKey)
	keyFile := write("server.key", "EC PRIVATE KEY", kb)
	addr := mcptest.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", "0", "--tls-port", port, "--bind", "127.0.0.1", "--dir", dir, "--save", "",
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", caFile, "--tls-auth-clients", "no",
		"--requirepass", "tls-pw")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := secret.Value("rediss://:tls-pw@" + addr)
	ping := func(o storeclient.Options) error {
		c, err := storeclient.Open(o)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return c.PingAll(ctx)
	}
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err = ping(storeclient.Options{URL: url, CAFile: caFile}); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("rediss:// with the CA file: %v", err)
	}
	if err := ping(storeclient.Options{URL: url}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("rediss:// without the CA file: %v, want a certificate error", err)
	}
}

// newCert returns a certificate for 127.0.0.1 signed by parent (a CA
// when isCA; self-signed when parent is nil) and its key.
func newCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "mcp-mux test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: isCA, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if !isCA {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}
