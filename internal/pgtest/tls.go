package pgtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/pgctl"
)

// TLS is a self-signed certificate for a test server on 127.0.0.1 and
// localhost: the server uses CertFile and KeyFile, clients verify with
// CAFile (the same certificate).
type TLS struct {
	CAFile, CertFile, KeyFile string
}

// NewTLS writes a fresh certificate and key into a temp dir. The files are
// readable by the server's OS user (the key 0600, owned by it when run as
// root), since PostgreSQL refuses a key others can read.
func NewTLS(t testing.TB) TLS {
	t.Helper()
	// Not t.TempDir: its parent is private to root, and the server's OS
	// user must reach the files.
	dir, err := os.MkdirTemp("", "pgtest-tls-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "localhost"},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	tl := TLS{CertFile: filepath.Join(dir, "server.crt"), KeyFile: filepath.Join(dir, "server.key")}
	tl.CAFile = tl.CertFile
	write := func(path, kind string, b []byte, mode os.FileMode) {
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: b}), mode); err != nil {
			t.Fatal(err)
		}
		if cred, err := pgctl.ServerCredential(); err == nil && cred != nil {
			if err := os.Chown(path, int(cred.Uid), int(cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(tl.CertFile, "CERTIFICATE", der, 0o644)
	write(tl.KeyFile, "EC PRIVATE KEY", keyDER, 0o600)
	return tl
}

// Settings turns TLS on in a cluster's configuration.
func (tl TLS) Settings() map[string]string {
	return map[string]string{"ssl": "on", "ssl_cert_file": tl.CertFile, "ssl_key_file": tl.KeyFile}
}
