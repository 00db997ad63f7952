package pgbin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeInstall makes a directory whose pg_dump reports version v.
func fakeInstall(t *testing.T, v string) string {
	return fakeInstallLogged(t, v, "/dev/null")
}

// fakeInstallLogged is fakeInstall whose pg_dump appends a line to the file
// log each time it runs.
func fakeInstallLogged(t *testing.T, v, log string) string {
	dir := t.TempDir()
	script := "#!/bin/sh\necho run >> '" + log + "'\necho 'pg_dump (PostgreSQL) " + v + "'\n"
	for _, p := range []string{"pg_dump", "pg_restore"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestFind(t *testing.T) {
	ctx := context.Background()
	dir := fakeInstall(t, "15.4")
	t.Setenv(EnvBinDir, dir)
	got, err := Find(ctx, 14)
	if err != nil || got.Major != 15 || got.Version != "15.4" || got.Dir != dir {
		t.Fatalf("Find(14) = %+v, %v", got, err)
	}
	_, err = Find(ctx, 17)
	if err == nil || !strings.Contains(err.Error(), "PostgreSQL 17 or newer") || !strings.Contains(err.Error(), "15.4") {
		t.Fatalf("Find(17) error = %v, want one naming the needed and found versions", err)
	}
	if got, err := Newest(ctx); err != nil || got.Dir != dir {
		t.Fatalf("Newest = %+v, %v", got, err)
	}
	t.Setenv(EnvBinDir, t.TempDir())
	if _, err := Find(ctx, 15); err == nil || !strings.Contains(err.Error(), "no pg_dump") {
		t.Fatalf("empty dir: error = %v", err)
	}
	if _, err := Newest(ctx); err == nil {
		t.Fatal("Newest with nothing installed succeeded")
	}
}

// TestFindAmongSeveral installs fake majors side by side under
// PGSPRINT_PG_ROOT (majors far above any real one, so that real
// installations on the machine cannot be picked) and checks that Find takes
// the oldest one that is new enough, or names the version it needs.
func TestFindAmongSeveral(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	for _, v := range []string{"90.1", "92.3"} {
		bin := filepath.Join(root, strings.Split(v, ".")[0], "bin")
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(fakeInstall(t, v), bin); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvBinDir, "")
	t.Setenv(EnvInstallRoot, root)
	for _, tc := range []struct {
		min     int
		want    string // version picked; "" for an error
		wantErr string
	}{
		{min: 89, want: "90.1"},
		{min: 90, want: "90.1"},
		{min: 91, want: "92.3"},
		{min: 92, want: "92.3"},
		{min: 93, wantErr: "PostgreSQL 93 or newer client programs are needed"},
	} {
		got, err := Find(ctx, tc.min)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "92.3") {
				t.Errorf("Find(%d) = %+v, %v; want an error containing %q and the versions found", tc.min, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got.Version != tc.want {
			t.Errorf("Find(%d) = %+v, %v; want version %s", tc.min, got, err, tc.want)
		}
	}
}

// TestFinderLooksOnce checks that a Finder answers from its first look:
// an installation added afterwards is not seen by it, while a nil Finder,
// which looks every time, sees it.
func TestFinderLooksOnce(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	t.Setenv(EnvBinDir, root)
	f := &Finder{}
	if _, err := f.Find(ctx, 15); err == nil || !strings.Contains(err.Error(), "no pg_dump") {
		t.Fatalf("empty dir: error = %v", err)
	}
	for _, p := range []string{"pg_dump", "pg_restore"} {
		script := "#!/bin/sh\necho 'pg_dump (PostgreSQL) 15.4'\n"
		if err := os.WriteFile(filepath.Join(root, p), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Find(ctx, 15); err == nil {
		t.Fatal("the Finder looked again: it found an installation added after its first look")
	}
	var none *Finder
	if got, err := none.Find(ctx, 15); err != nil || got.Version != "15.4" {
		t.Fatalf("nil Finder: Find(15) = %+v, %v", got, err)
	}
}

// TestFindAsksNamedFirst: Find runs the pg_dump of the one directory named
// for the oldest major that will do, and looks everywhere (as Installed)
// only when none will, or when a directory is not the version its name
// says, so that the answer is the one Installed's list gives.
func TestFindAsksNamedFirst(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	log := filepath.Join(t.TempDir(), "runs")
	for name, v := range map[string]string{"90": "90.1", "91": "95.0", "92": "92.3"} {
		bin := filepath.Join(root, name, "bin")
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(fakeInstallLogged(t, v, log), bin); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvBinDir, "")
	t.Setenv(EnvInstallRoot, root)
	runs := func() int {
		b, err := os.ReadFile(log)
		if os.IsNotExist(err) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "run\n")
	}
	for _, tc := range []struct {
		min     int
		want    string
		oneLook bool // the named directory's pg_dump alone ran
	}{
		{min: 90, want: "90.1", oneLook: true},
		// 91/bin holds 95: every installation is asked, and 92.3 is
		// the oldest that will do.
		{min: 91, want: "92.3"},
		{min: 92, want: "92.3", oneLook: true},
		// No directory is named 93 or above: 91/bin's 95 is found by
		// looking everywhere.
		{min: 93, want: "95.0"},
	} {
		before := runs()
		got, err := Find(ctx, tc.min)
		if err != nil || got.Version != tc.want {
			t.Errorf("Find(%d) = %+v, %v; want version %s", tc.min, got, err, tc.want)
		}
		if n := runs() - before; tc.oneLook && n != 1 || !tc.oneLook && n != 3 {
			t.Errorf("Find(%d) ran the fake pg_dumps %d times", tc.min, n)
		}
	}
	// A Finder runs each pg_dump once, whatever it is asked.
	var f Finder
	before := runs()
	for _, min := range []int{90, 91, 92, 93, 90} {
		if _, err := f.Find(ctx, min); err != nil {
			t.Fatalf("Finder.Find(%d): %v", min, err)
		}
	}
	if n := runs() - before; n != 3 {
		t.Errorf("a Finder ran the fake pg_dumps %d times, want each once (3)", n)
	}
}
