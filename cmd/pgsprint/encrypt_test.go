package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// writeIdentity writes a new age identity file (as age-keygen does) and
// returns its path, its public key and its secret, which no output may
// ever show.
func writeIdentity(t *testing.T, dir, name string) (path, public, secret string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, name)
	body := "# public key: " + id.Recipient().String() + "\n" + id.String() + "\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, id.Recipient().String(), id.String()
}

// TestEncryptTorture dumps the torture database encrypted to two
// recipients and restores it with each (from a file and from a pipe):
// schema text and row hashes are the source's. The raw archive holds no
// row value, table name or schema text; a wrong or missing key fails in
// one line, exit 1, with the target untouched; verify without a key
// checks the structure and says so; a passphrase works alone; a damaged
// frame is refused and named. No secret appears in any output.
func TestEncryptTorture(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := shared(t)
	const src = "src crypt"
	c.TortureDB(src)
	if err := c.Exec(ctx, src, `CREATE TABLE public.secret_payroll_xyz (who text); INSERT INTO public.secret_payroll_xyz VALUES ('zebracorn-4711')`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	key1, pub1, sec1 := writeIdentity(t, dir, "key1.txt")
	key2, pub2, sec2 := writeIdentity(t, dir, "key2.txt")
	key3, _, sec3 := writeIdentity(t, dir, "key3.txt")
	recipients := filepath.Join(dir, "recipients.txt")
	if err := os.WriteFile(recipients, []byte("# the backup host\n"+pub2+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const pass = "correct horse battery staple"
	passFile := filepath.Join(dir, "pass.txt")
	if err := os.WriteFile(passFile, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var outputs []string
	run := func(env []string, args ...string) result {
		t.Helper()
		r := pgsprint(t, env, args...)
		outputs = append(outputs, r.stdout, r.stderr)
		return r
	}
	must := func(env []string, args ...string) result {
		t.Helper()
		r := run(env, args...)
		if r.code != 0 {
			t.Fatalf("pgsprint %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r
	}
	same := func(t *testing.T, dst string) {
		t.Helper()
		pgtest.RequireSameSchema(t, c.BinDir(), c.ConnString(src), c.ConnString(dst))
		pgtest.RequireSameData(t, c.ConnString(src), c.ConnString(dst))
	}
	createDB := func(name string) {
		t.Helper()
		if err := c.CreateDB(ctx, name); err != nil {
			t.Fatal(err)
		}
	}

	// Uncompressed, so that nothing but the encryption hides the rows.
	file := filepath.Join(dir, "crypt.pgs")
	must(nil, "dump", "-q", "-d", c.ConnString(src), "-f", file, "-j", "2", "-Z", "none", "--encrypt-to", pub1, "--encrypt-to-file", recipients)

	t.Run("nothing readable", func(t *testing.T) {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// Nor who can read it (recipients' public keys), as age's own format.
		for _, s := range []string{"zebracorn-4711", "secret_payroll_xyz", "CREATE TABLE", sec1, sec2, pub1, pub2} {
			if bytes.Contains(raw, []byte(s)) {
				t.Errorf("encrypted archive holds %q in clear", s)
			}
		}
		clear := filepath.Join(dir, "clear.pgs")
		must(nil, "dump", "-q", "-d", c.ConnString(src), "-f", clear, "-j", "2", "-Z", "none", "-t", "public.secret_payroll_xyz")
		if raw, _ := os.ReadFile(clear); !bytes.Contains(raw, []byte("zebracorn-4711")) {
			t.Fatal("the clear archive lacks the row value: the test proves nothing")
		}
	})

	t.Run("file with the first recipient", func(t *testing.T) {
		createDB("dst key1")
		must(nil, "restore", "-q", "-f", file, "-d", c.ConnString("dst key1"), "-j", "2", "--identity", key1)
		same(t, "dst key1")
	})

	t.Run("pipe with the second recipient", func(t *testing.T) {
		createDB("dst key2")
		cmds := [][]string{
			{"pgsprint", "dump", "-q", "-f", "-", "-j", "2", "--chunk-size", "64kB", "--encrypt-to", pub1, "--encrypt-to-file", recipients, "-d", c.ConnString(src)},
			{"pgsprint", "restore", "-q", "-f", "-", "-j", "2", "--spill-dir", t.TempDir(), "--identity", key2, "-d", c.ConnString("dst key2")},
		}
		for i, r := range runPipeline(t, cmds...) {
			outputs = append(outputs, r.stdout, r.stderr)
			if r.code != 0 {
				t.Fatalf("%s: exit %d: %s", cmds[i][:2], r.code, r.stderr)
			}
		}
		same(t, "dst key2")
	})

	t.Run("list and verify", func(t *testing.T) {
		// With keys, each says which of the reader's identities opened it.
		opened2 := "opened with identity file " + key2 + " (" + pub2 + ")"
		if r := must(nil, "list", file, "--identity", key1, "--identity", key2); !strings.Contains(r.stdout, "secret_payroll_xyz") || !strings.Contains(r.stdout, "encrypted:  opened with identity file "+key1+" ("+pub1+")") {
			t.Errorf("list with keys does not show the table and the key that opened it:\n%s", r.stdout)
		}
		if r := must(nil, "list", file, "--identity", key3, "--identity", key2); !strings.Contains(r.stdout, "encrypted:  "+opened2) {
			t.Errorf("list with the second key does not name it:\n%s", r.stdout)
		}
		// restore -l reads the schema pg_restore opens from a memfd.
		if r := must(nil, "restore", "-f", file, "-l", "--identity", key1); !strings.Contains(r.stdout, "secret_payroll_xyz") {
			t.Errorf("restore -l with a key does not list the table:\n%s", r.stdout)
		}
		// Without, that it is encrypted and nothing more.
		r := run(nil, "list", file)
		if r.code != 1 || !strings.HasSuffix(strings.TrimSpace(r.stderr), ".pgs is encrypted; no identity given (--identity FILE)") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("list without a key: exit %d: %s", r.code, r.stderr)
		}
		r = must(nil, "verify", file)
		if !strings.Contains(r.stdout, "structure sound (encrypted; contents not checked") || strings.Contains(r.stdout, "age1") {
			t.Errorf("verify without a key: %s", r.stdout)
		}
		r = must(nil, "verify", file, "--identity", key2)
		if !strings.Contains(r.stdout, ": sound:") || !strings.Contains(r.stdout, "encrypted, "+opened2+", every authentication tag checked") {
			t.Errorf("verify with a key: %s", r.stdout)
		}
	})

	t.Run("wrong key", func(t *testing.T) {
		createDB("dst wrong")
		before := pgtest.SchemaDump(t, c.BinDir(), c.ConnString("dst wrong"))
		want := " is encrypted; no matching identity (none of the given identities opens it)"
		r := run(nil, "restore", "-f", file, "-d", c.ConnString("dst wrong"), "--identity", key3)
		if r.code != 1 || !strings.Contains(r.stderr, want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("restore with a wrong key: exit %d, want 1 and one line with %q: %q", r.code, want, r.stderr)
		}
		r = pgsprintStdin(t, nil, mustOpen(t, file), "restore", "-f", "-", "-d", c.ConnString("dst wrong"))
		outputs = append(outputs, r.stderr)
		if r.code != 1 || !strings.Contains(r.stderr, "no identity given") {
			t.Errorf("pipe restore without a key: exit %d: %s", r.code, r.stderr)
		}
		if got := pgtest.SchemaDump(t, c.BinDir(), c.ConnString("dst wrong")); got != before {
			t.Error("a refused restore changed the target")
		}
		if fp := pgtest.Fingerprint(t, c.ConnString("dst wrong")); len(fp) != 0 {
			t.Errorf("a refused restore left %d tables", len(fp))
		}
	})

	t.Run("damaged frame", func(t *testing.T) {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// The middle of the file is frame payload in an archive of
		// this size (the footer and header are a small part of it).
		raw[len(raw)/2] ^= 0x20
		bad := filepath.Join(dir, "bad.pgs")
		if err := os.WriteFile(bad, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		r := run(nil, "verify", bad, "--identity", key1)
		t.Logf("verify of a damaged archive: %s", r.stderr)
		if r.code != 1 || !strings.Contains(r.stderr, "frame") {
			t.Errorf("verify of a damaged archive: exit %d: %s", r.code, r.stderr)
		}
		r = run(nil, "verify", bad)
		t.Logf("structure check of a damaged archive: %s", r.stderr)
		if r.code != 1 || !strings.Contains(r.stderr, "frame") {
			t.Errorf("structure check of a damaged archive: exit %d: %s", r.code, r.stderr)
		}
		createDB("dst bad")
		r = run(nil, "restore", "-q", "-f", bad, "-d", c.ConnString("dst bad"), "--identity", key1)
		t.Logf("restore of a damaged archive: %s", r.stderr)
		if r.code != 1 || !strings.Contains(r.stderr, "frame") {
			t.Errorf("restore of a damaged archive: exit %d: %s", r.code, r.stderr)
		}
	})

	t.Run("passphrase", func(t *testing.T) {
		pfile := filepath.Join(dir, "pass.pgs")
		must(nil, "dump", "-q", "-d", c.ConnString(src), "-f", pfile, "-j", "2", "--passphrase-file", passFile, "-t", "public.secret_payroll_xyz")
		createDB("dst pass")
		must([]string{"PGSPRINT_PASSPHRASE=" + pass}, "restore", "-q", "-f", pfile, "-d", c.ConnString("dst pass"))
		if fp := pgtest.Fingerprint(t, c.ConnString("dst pass")); len(fp) != 1 {
			t.Errorf("passphrase restore: %d tables, want 1", len(fp))
		}
		r := run([]string{"PGSPRINT_PASSPHRASE=wrong words"}, "list", pfile)
		if r.code != 1 || !strings.Contains(r.stderr, " is encrypted with a passphrase; the passphrase does not match") {
			t.Errorf("wrong passphrase: exit %d: %s", r.code, r.stderr)
		}
		r = run(nil, "dump", "-d", c.ConnString(src), "-f", filepath.Join(dir, "x.pgs"), "--passphrase-file", passFile, "--encrypt-to", pub1)
		if r.code != exitUsage {
			t.Errorf("passphrase with a recipient: exit %d: %s", r.code, r.stderr)
		}
	})

	for _, out := range outputs {
		for _, secret := range []string{sec1, sec2, sec3, "AGE-SECRET-KEY", pass} {
			if strings.Contains(out, secret) {
				t.Fatalf("a secret appeared in pgsprint's output: %q", out)
			}
		}
	}
}

func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
