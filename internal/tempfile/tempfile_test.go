package tempfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// deadPID returns the id of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestSweep: only files of our patterns whose creator is dead are removed;
// the live ones (this process, pid 1), other names and other patterns stay.
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	dead := strconv.Itoa(deadPID(t))
	self := strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		name    string
		removed bool
	}{
		{"pgsprint-schema-" + dead + "-123456.dump", true},
		{".a.pgs.partial-" + dead + "-42", true},
		{"pgsprint-demo-" + dead + "-7", true}, // a directory, below
		{"pgsprint-schema-" + self + "-123456.dump", false},
		{"pgsprint-schema-1-123456.dump", false},              // pid 1 is alive
		{"pgsprint-schema-123456.dump", false},                // no pid: an older pgsprint's, or not ours
		{"pgsprint-schema-" + dead + "-12x.dump", false},      // not a name Create makes
		{".b.pgs.partial-" + dead + "-42", false},             // another archive's
		{"pgsprint-schema-" + dead + "-123456.dump.x", false}, // another suffix
		{"unrelated-" + dead + "-1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			var err error
			if strings.HasPrefix(tc.name, "pgsprint-demo-") {
				err = os.MkdirAll(filepath.Join(path, "sub"), 0o700)
			} else {
				err = os.WriteFile(path, []byte("x"), 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
			_, pattern := Partial(filepath.Join(dir, "a.pgs"))
			got, err := Sweep(dir, append(InTempDir(), pattern)...)
			if err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Lstat(path)
			if gone := os.IsNotExist(statErr); gone != tc.removed {
				t.Errorf("removed %v, want %v (sweep said %v)", gone, tc.removed, got)
			}
			if tc.removed && (len(got) != 1 || got[0].Path != path || strconv.Itoa(got[0].PID) != dead) {
				t.Errorf("sweep reported %v, want %s by pid %s", got, path, dead)
			}
			if !tc.removed {
				os.RemoveAll(path)
			}
		})
	}
}

// TestCreate: the name carries this process's id and Sweep recognizes it.
func TestCreate(t *testing.T) {
	dir := t.TempDir()
	f, err := Create(dir, Schema)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	base := filepath.Base(f.Name())
	if pid, ok := creator(base, []string{Schema}); !ok || pid != os.Getpid() {
		t.Errorf("%s: creator %d %v, want %d", base, pid, ok, os.Getpid())
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode())
	}
	if removed, err := Sweep(dir, Schema); err != nil || len(removed) != 0 {
		t.Errorf("sweep removed a live run's file: %v %v", removed, err)
	}
	if _, err := Create(dir, "no-star"); err == nil {
		t.Error("a pattern without * was accepted")
	}
}
