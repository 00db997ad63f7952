package pgtest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/pgsprint/pgsprint/internal/pgctl"
)

// templateFormat names what pgctl.InitTemplate makes; change it when
// initdb's options or the files it writes change, so that no test copies a
// template an older harness left in the temporary directory.
const templateFormat = "2"

// templates holds, per bin directory, the data directory every cluster of
// this test process is copied from (see pgctl.Options.Template): one
// initdb per PostgreSQL installation instead of one per cluster.
var templates struct {
	sync.Mutex
	dirs map[string]*templateDir
}

type templateDir struct {
	once sync.Once
	dir  string
	err  error
}

// template returns the template data directory of binDir (already
// resolved), making it when no test process made it before: templates are
// kept in the temporary directory (pgsprint-templates-UID), named after the
// installation (its postgres binary's path, size and time) and the
// server's OS user, so the packages `go test ./...` runs at once share
// them, and later runs too.
func template(ctx context.Context, binDir string) (string, error) {
	templates.Lock()
	if templates.dirs == nil {
		templates.dirs = map[string]*templateDir{}
	}
	td := templates.dirs[binDir]
	if td == nil {
		td = &templateDir{}
		templates.dirs[binDir] = td
	}
	templates.Unlock()
	td.once.Do(func() { td.dir, td.err = makeTemplate(ctx, binDir) })
	return td.dir, td.err
}

func makeTemplate(ctx context.Context, binDir string) (string, error) {
	st, err := os.Stat(filepath.Join(binDir, "postgres"))
	if err != nil {
		return "", fmt.Errorf("pgtest: template of %s: %w", binDir, err)
	}
	uid := os.Geteuid()
	if cred, err := pgctl.ServerCredential(); err != nil {
		return "", err
	} else if cred != nil {
		uid = int(cred.Uid)
	}
	key := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%d\x00%d\x00%d", templateFormat, binDir, st.Size(), st.ModTime().UnixNano(), uid)))
	// The same base as the clusters' own directories (a short one, for
	// unix socket paths), so the template's final rename stays on one file
	// system.
	base := os.TempDir()
	if len(base) > 60 {
		base = "/tmp"
	}
	parent := filepath.Join(base, fmt.Sprintf("pgsprint-templates-%d", os.Geteuid()))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	dir := filepath.Join(parent, fmt.Sprintf("%x", key[:8]))
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err == nil {
		return dir, nil
	}
	if err := pgctl.InitTemplate(ctx, binDir, dir); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	return dir, nil
}
