package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestDebPackage builds the release files as make dist does
// (scripts/dist.sh, packing this package's binary rather than building a
// static one), installs the .deb into a scratch root (dpkg -x) and runs
// the installed binary through a dump and a restore checked by row
// hashes. The package depends on postgresql-client and holds the man
// pages, the bash, zsh and fish completions and the license
// (/usr/share/doc/pgsprint/copyright, from LICENSE or
// $PGSPRINT_DIST_LICENSE); a named license file that is missing is refused;
// SHA256SUMS checks.
func TestDebPackage(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"dpkg-deb", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv(pgtest.EnvRequire) != "" {
				t.Fatalf("%s not found (make dist needs it)", tool)
			}
			t.Skipf("%s not found", tool)
		}
	}
	ctx := context.Background()
	c := shared(t)
	out := t.TempDir()
	env := append(os.Environ(), "PGSPRINT_DIST_BINARY="+binary, "VERSION=1.2.3-4-gabcdef0", "PGSPRINT_DIST_GZIP=1")
	none := exec.Command("../../scripts/dist.sh", t.TempDir())
	none.Env = append(env, "PGSPRINT_DIST_LICENSE="+filepath.Join(out, "none"))
	if b, err := none.CombinedOutput(); err == nil || !strings.Contains(string(b), "dist: no license file") {
		t.Errorf("scripts/dist.sh without a license file: %v\n%s", err, b)
	}
	// The project's LICENSE when it has one; else a stand-in, which
	// tests only that the file reaches the package.
	license, err := filepath.Abs("../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(license); err != nil {
		license = filepath.Join(t.TempDir(), "LICENSE")
		if err := os.WriteFile(license, []byte("stand-in license text of the package test\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	licenseText, err := os.ReadFile(license)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("../../scripts/dist.sh", out)
	cmd.Env = append(env, "PGSPRINT_DIST_LICENSE="+license)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/dist.sh: %v\n%s", err, b)
	}
	deb := filepath.Join(out, "pgsprint_1.2.3+4.gabcdef0_amd64.deb")
	tarball := filepath.Join(out, "pgsprint_1.2.3-4-gabcdef0_linux_amd64.tar.gz")
	sums := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	sums.Dir = out
	if b, err := sums.CombinedOutput(); err != nil || strings.Count(string(b), ": OK\n") != 2 {
		t.Fatalf("SHA256SUMS: %v\n%s", err, b)
	}
	if b, err := exec.Command("tar", "-tzf", tarball).CombinedOutput(); err != nil ||
		!strings.Contains(string(b), "pgsprint_1.2.3-4-gabcdef0_linux_amd64/pgsprint\n") ||
		!strings.Contains(string(b), "/man/man1/pgsprint-dump.1\n") ||
		!strings.Contains(string(b), "pgsprint_1.2.3-4-gabcdef0_linux_amd64/docs/guide/upgrade.md\n") {
		t.Fatalf("tarball: %v\n%s", err, b)
	}
	for field, want := range map[string]string{"Package": "pgsprint", "Version": "1.2.3+4.gabcdef0", "Depends": "postgresql-client"} {
		if b, err := exec.Command("dpkg-deb", "--field", deb, field).Output(); err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("the .deb's %s is %q (%v), want %q", field, b, err, want)
		}
	}

	root := t.TempDir()
	if b, err := exec.Command("dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, b)
	}
	for _, f := range []string{
		"usr/share/man/man1/pgsprint.1.gz", "usr/share/man/man1/pgsprint-dump.1.gz", "usr/share/man/man1/pgsprint-restore.1.gz",
		"usr/share/bash-completion/completions/pgsprint", "usr/share/zsh/vendor-completions/_pgsprint", "usr/share/fish/vendor_completions.d/pgsprint.fish",
		"usr/share/doc/pgsprint/README.md", "usr/share/doc/pgsprint/guide/upgrade.md",
	} {
		if st, err := os.Stat(filepath.Join(root, f)); err != nil || st.Size() == 0 {
			t.Errorf("the .deb lacks %s (%v)", f, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "usr/share/doc/pgsprint/copyright")); err != nil || !strings.Contains(string(b), string(licenseText)) {
		t.Errorf("the .deb's /usr/share/doc/pgsprint/copyright lacks the license (%v):\n%s", err, b)
	}
	installed := filepath.Join(root, "usr/bin/pgsprint")
	run := func(args ...string) {
		t.Helper()
		if b, err := exec.Command(installed, args...).CombinedOutput(); err != nil {
			t.Fatalf("installed pgsprint %s: %v\n%s", args[0], err, b)
		}
	}
	// The hidden command that wrote the pages stays out of them.
	if _, err := os.Stat(filepath.Join(root, "usr/share/man/man1/pgsprint-gen-docs.1.gz")); err == nil {
		t.Error("the hidden gen-docs command has a man page")
	}
	for _, db := range []string{"src", "dst"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Exec(ctx, "src", `CREATE TABLE "Packed t" (id int PRIMARY KEY, v text);
		INSERT INTO "Packed t" SELECT i, md5(i::text) FROM generate_series(1, 2000) i;
		CREATE TABLE other (x numeric); INSERT INTO other VALUES (1.5), (NULL);`); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "packed.pgs")
	run("dump", "-q", "-d", c.ConnString("src"), "-f", file, "-j", "2")
	run("restore", "-q", "-f", file, "-d", c.ConnString("dst"), "-j", "2")
	if fp := pgtest.Fingerprint(t, c.ConnString("dst")); len(fp) != 2 {
		t.Fatalf("restored tables: %v, want 2", fp)
	}
	pgtest.RequireSameData(t, c.ConnString("src"), c.ConnString("dst"))
}
