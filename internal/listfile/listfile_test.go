package listfile

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestLines: blank lines and # comments are skipped, the others come
// trimmed with their numbers; an error of each names the flag, the path
// and the line; a missing file names the flag and the path once.
func TestLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules")
	if err := os.WriteFile(path, []byte("# a comment\n\n  one  \n\t# another\ntwo\nbad\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var got []string
	var nums []int
	err := Lines("--x-file", path, func(n int, line string) error {
		if line == "bad" {
			return errors.New("not a rule")
		}
		got, nums = append(got, line), append(nums, n)
		return nil
	})
	if want := "--x-file " + path + " line 6: not a rule"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if !reflect.DeepEqual(got, []string{"one", "two"}) || !reflect.DeepEqual(nums, []int{3, 5}) {
		t.Errorf("lines %q at %v, want one at 3, two at 5", got, nums)
	}
	missing := filepath.Join(dir, "none")
	err = Lines("--x-file", missing, func(int, string) error { return nil })
	if want := "--x-file " + missing + ": no such file or directory"; err == nil || err.Error() != want {
		t.Errorf("missing file: %v, want %q", err, want)
	}
}
