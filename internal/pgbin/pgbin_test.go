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
	dir := t.TempDir()
	script := "#!/bin/sh\necho 'pg_dump (PostgreSQL) " + v + "'\n"
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
	t.Setenv(EnvBinDir, t.TempDir())
	if _, err := Find(ctx, 15); err == nil || !strings.Contains(err.Error(), "no pg_dump") {
		t.Fatalf("empty dir: error = %v", err)
	}
}
