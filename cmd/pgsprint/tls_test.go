package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestTLSAndSecrets dumps and restores over TLS with certificate
// verification, which works only if sslmode and sslrootcert reach pg_dump
// and pg_restore too, and watches every process's command line meanwhile:
// the password must appear in none of them, nor in the archive.
func TestTLSAndSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tl := pgtest.NewTLS(t)
	c := pgtest.New(t, pgtest.Options{Settings: tl.Settings()})
	const password = "Pw-tls-9f8e7d"
	for _, db := range []string{"src", "dst"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	err := c.Exec(ctx, "src", `CREATE ROLE tlsuser LOGIN SUPERUSER PASSWORD '`+password+`';
CREATE TABLE t AS SELECT i, md5(i::text) AS v FROM generate_series(1, 50000) i;`)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(db string) string { // TCPConnString says sslmode=disable
		return strings.Replace(c.TCPConnString(db, "tlsuser"), "sslmode=disable", "", 1) + " sslmode=verify-ca sslrootcert='" + tl.CAFile + "'"
	}
	env := []string{"PGPASSWORD=" + password, "PGPASSFILE=/nonexistent", "HOME=" + t.TempDir()}

	var seen atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // what `ps` would show
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
			for _, p := range procs {
				b, err := os.ReadFile(p)
				if err != nil {
					continue
				}
				if strings.Contains(string(b), password) {
					t.Errorf("password visible in %s: %q", p, b)
				}
				if strings.Contains(string(b), "pg_dump") || strings.Contains(string(b), "pg_restore") {
					seen.Add(1)
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	file := filepath.Join(t.TempDir(), "tls.pgs")
	for _, args := range [][]string{
		{"dump", "-d", conn("src"), "-f", file, "-q"},
		{"restore", "-f", file, "-d", conn("dst"), "-q"},
	} {
		r := pgsprint(t, env, args...)
		if r.code != 0 {
			t.Fatalf("%s over TLS: exit %d: %s", args[0], r.code, r.stderr)
		}
		if strings.Contains(r.stderr+r.stdout, password) {
			t.Errorf("%s output shows the password", args[0])
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("saw pg_dump/pg_restore command lines %d times", seen.Load())
	archive, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(archive), password) {
		t.Error("the archive holds the password")
	}
	pgtest.RequireSameData(t, c.ConnString("src"), c.ConnString("dst"))

	// Each TLS failure is one line that names TLS, its cause and the
	// next step, and exits 3 (cannot connect), before anything is written.
	other := pgtest.NewTLS(t)
	plain := shared(t)
	for _, tc := range []struct {
		name, conn string
		code       int
		want       []string
	}{
		// A file named by the options: a usage error, found before connecting.
		{"missing root certificate", strings.Replace(conn("src"), tl.CAFile, filepath.Join(t.TempDir(), "wrong-ca.crt"), 1), exitUsage,
			[]string{"invalid connection options: TLS: sslrootcert ", "wrong-ca.crt cannot be read (no such file or directory): give the file's path in sslrootcert"}},
		{"certificate of another authority", strings.Replace(conn("src"), tl.CAFile, other.CAFile, 1), exitConnection,
			[]string{"connect to ", ": TLS: the server's certificate cannot be verified (sslmode=verify-ca) (x509: certificate signed by unknown authority", "give in sslrootcert the certificate of the authority that signed it"}},
		{"a server without TLS", strings.Replace(plain.TCPConnString("postgres", "postgres"), "sslmode=disable", "", 1) + " sslmode=require", exitConnection,
			[]string{"connect to ", ": TLS: the server refused TLS (sslmode=require): turn ssl = on"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "x.pgs")
			r := pgsprint(t, env, "dump", "-d", tc.conn, "-f", out)
			checkOneError(t, r.code, tc.code, r.stderr, "TLS: ")
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("error does not say %q", w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("the failed dump wrote %s", out)
			}
		})
	}
}
