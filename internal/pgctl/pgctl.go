// Package pgctl starts and stops throwaway PostgreSQL servers in
// temporary directories, from the installed binaries: initdb and pg_ctl run
// as the OS user "postgres" when the caller is root (initdb refuses root).
//
// It serves both `pgsprint demo`, which needs a scratch server with sample
// data, and the test harness internal/pgtest, which wraps it for testing.TB.
// It must not import "testing", so that the pgsprint binary does not link
// the test harness.
package pgctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// SuperuserName is the bootstrap superuser of every cluster. It is fixed so
// that tests can build connection strings and expected ownership without
// asking the cluster.
const SuperuserName = "postgres"

// SuperuserPassword is the password of SuperuserName. Local (unix socket)
// connections are trusted, but TCP connections use scram-sha-256 so that the
// code paths that send a password are exercised too; tests pass this value to
// whatever they are testing (a flag, PGPASSWORD, a config field).
const SuperuserPassword = "postgres-test-pw"

// EnvBinDir names the environment variable that selects the PostgreSQL bin
// directory when Options.BinDir is empty, so that CI can run the same tests
// against several major versions without code changes.
const EnvBinDir = "PGSPRINT_TEST_PG_BIN"

// ErrNoBinaries is returned (wrapped) when no PostgreSQL installation can be
// found, so that callers can tell "not installed" from a broken install:
// pgtest turns it into a skip, the demo into advice to install PostgreSQL.
var ErrNoBinaries = errors.New("pgctl: no PostgreSQL binaries found")

// Options configures Start. The zero value is a sensible default.
type Options struct {
	// BinDir is the directory holding initdb, pg_ctl, postgres, pg_dump and
	// psql. It is selectable because pgsprint must be tested against several
	// major versions. When empty, FindBinDir's search order applies.
	BinDir string

	// Settings are extra postgresql.conf parameters, appended after the
	// harness defaults so that they win. Values are written quoted, which
	// PostgreSQL accepts for every parameter type.
	Settings map[string]string

	// Template, when set, is a data directory made by InitTemplate with
	// the same BinDir: Start copies it instead of running initdb, which
	// costs seconds on a busy host where a copy costs a fraction of one
	// (the test harness starts dozens of clusters).
	Template string

	// Dir is the directory the cluster's own directory is made in; empty
	// for os.TempDir(). A memory file system (/dev/shm) spares the CPU
	// that a disk's file system spends on every page a test server writes
	// (CREATE DATABASE copies megabytes).
	Dir string
}

// Instance is a throwaway PostgreSQL server (a "database cluster" in
// PostgreSQL's words; in pgsprint "cluster" is the whole server that
// dump --all reads) in a temporary directory. It
// listens on a unix socket in its own directory and on TCP 127.0.0.1 on a
// free port. Local connections are trusted; TCP connections require
// scram-sha-256 (the superuser's password is SuperuserPassword). Its methods
// are safe for concurrent use, so one cluster can serve parallel subtests.
type Instance struct {
	binDir  string
	dir     string // root of everything the cluster owns; removed by Close
	dataDir string
	sockDir string
	logFile string
	port    int
	version int
	cred    *syscall.Credential // nil when the server runs as the current user

	closeOnce sync.Once
	closeErr  error
}

// Start creates, configures and starts a new cluster and returns once it
// accepts connections. The caller must Close it.
func Start(ctx context.Context, opts Options) (*Instance, error) {
	binDir, err := FindBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	for key := range opts.Settings {
		if !isConfName(key) {
			return nil, fmt.Errorf("pgctl: invalid setting name %q", key)
		}
	}
	c, err := newCluster(binDir, opts.Dir)
	if err != nil {
		return nil, err
	}
	if opts.Template != "" {
		err = c.copyTemplate(ctx, opts.Template)
	} else {
		err = c.initdb(ctx)
	}
	if err == nil {
		err = c.listenAndStart(ctx, opts.Settings, true)
	}
	if err != nil {
		if cerr := c.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	return c, nil
}

// newCluster makes the directory of a cluster that is not yet initialized,
// in base ("" for os.TempDir()): the cluster root and its socket
// directory, owned by the server's user.
func newCluster(binDir, base string) (*Instance, error) {
	cred, err := ServerCredential()
	if err != nil {
		return nil, err
	}
	if base == "" {
		base = os.TempDir()
	}
	// Unix socket paths are limited to ~107 bytes, so avoid a long base.
	if len(base) > 60 {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgctl: creating temp dir: %w", err)
	}
	c := &Instance{
		binDir:  binDir,
		dir:     dir,
		dataDir: filepath.Join(dir, "data"),
		sockDir: filepath.Join(dir, "sock"),
		logFile: filepath.Join(dir, "server.log"),
		cred:    cred,
	}
	if err := os.Mkdir(c.sockDir, 0o755); err != nil {
		return nil, errors.Join(fmt.Errorf("pgctl: creating socket dir: %w", err), os.RemoveAll(dir))
	}
	if err := os.Chmod(c.dir, 0o755); err != nil {
		return nil, errors.Join(fmt.Errorf("pgctl: chmod %s: %w", c.dir, err), os.RemoveAll(dir))
	}
	if c.cred != nil {
		for _, d := range []string{c.dir, c.sockDir} {
			if err := os.Chown(d, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return nil, errors.Join(fmt.Errorf("pgctl: chown %s to the postgres user: %w", d, err), os.RemoveAll(dir))
			}
		}
	}
	return c, nil
}

// InitTemplate runs initdb with binDir's binaries as Start does, into dir
// (which must not exist; its parent must be on the same file system as
// os.TempDir()), and leaves it stopped, for Options.Template. dir appears
// complete or not at all: the data directory is made elsewhere and renamed
// to dir, so processes that race to make the same template agree (the
// losers' renames fail and their directories are removed; they get an
// error matching fs.ErrExist and may use dir).
func InitTemplate(ctx context.Context, binDir, dir string) error {
	binDir, err := FindBinDir(binDir)
	if err != nil {
		return err
	}
	c, err := newCluster(binDir, "") // renamed into dir: the same file system
	if err != nil {
		return err
	}
	err = c.initdb(ctx)
	if err == nil {
		if rerr := os.Rename(c.dataDir, dir); rerr != nil {
			err = fmt.Errorf("pgctl: template %s: %w", dir, rerr)
		}
	}
	return errors.Join(err, c.Close())
}

// copyTemplate makes the data directory a copy of template (see
// InitTemplate), owners and modes kept.
func (c *Instance) copyTemplate(ctx context.Context, template string) error {
	out, err := exec.CommandContext(ctx, "cp", "-a", "--", template, c.dataDir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgctl: copying template %s: %w\n%s", template, err, out)
	}
	return c.readVersion()
}

// initdb makes the data directory: UTF8, the superuser's password for TCP
// logins, trust on the unix socket.
func (c *Instance) initdb(ctx context.Context) error {
	pwFile := filepath.Join(c.dir, "pwfile")
	if err := os.WriteFile(pwFile, []byte(SuperuserPassword+"\n"), 0o600); err != nil {
		return fmt.Errorf("pgctl: writing password file: %w", err)
	}
	if c.cred != nil {
		if err := os.Chown(pwFile, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("pgctl: chown password file: %w", err)
		}
	}

	// Prefer C.UTF-8 (real UTF-8 ctype, deterministic collation); fall back
	// to C where that locale does not exist.
	var initErr error
	for _, locale := range []string{"C.UTF-8", "C"} {
		initErr = c.run(ctx, filepath.Join(c.binDir, "initdb"),
			"-D", c.dataDir, "-U", SuperuserName, "-E", "UTF8", "--locale="+locale,
			"--auth-local=trust", "--auth-host=scram-sha-256", "--pwfile="+pwFile, "--no-sync",
			// 1 MB WAL segments: a new data directory holds one segment,
			// and tests copy it for every cluster (Options.Template).
			"--wal-segsize=1")
		if initErr == nil {
			break
		}
		if err := os.RemoveAll(c.dataDir); err != nil {
			return fmt.Errorf("pgctl: removing failed data dir: %w", err)
		}
	}
	if initErr != nil {
		return fmt.Errorf("pgctl: initdb: %w", initErr)
	}
	if err := os.Remove(pwFile); err != nil {
		return fmt.Errorf("pgctl: removing password file: %w", err)
	}
	hba := "# written by pgtest\n" +
		"local all all trust\n" +
		"local replication all trust\n" +
		"host all all 127.0.0.1/32 scram-sha-256\n" +
		"host replication all 127.0.0.1/32 scram-sha-256\n"
	if err := c.writeOwned(filepath.Join(c.dataDir, "pg_hba.conf"), hba); err != nil {
		return err
	}
	return c.readVersion()
}

// readVersion reads the data directory's major version.
func (c *Instance) readVersion() error {
	ver, err := os.ReadFile(filepath.Join(c.dataDir, "PG_VERSION"))
	if err != nil {
		return fmt.Errorf("pgctl: reading PG_VERSION: %w", err)
	}
	if c.version, err = strconv.Atoi(strings.TrimSpace(string(ver))); err != nil {
		return fmt.Errorf("pgctl: parsing PG_VERSION %q: %w", ver, err)
	}
	return nil
}

// listenAndStart picks a free port, writes pgtest.conf (and, when include
// is set, the line of postgresql.conf that includes it), and starts the
// server in the initialized data directory.
func (c *Instance) listenAndStart(ctx context.Context, settings map[string]string, include bool) error {
	// A free port is found by binding to :0 and releasing it; another
	// process may grab it in between, so retry a few times.
	var startErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		c.port = port
		if err := c.writeOwned(filepath.Join(c.dataDir, "pgtest.conf"), c.config(settings)); err != nil {
			return err
		}
		conf := filepath.Join(c.dataDir, "postgresql.conf")
		if attempt == 0 && include {
			f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return fmt.Errorf("pgctl: opening postgresql.conf: %w", err)
			}
			_, werr := f.WriteString("\ninclude 'pgtest.conf'\n")
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				return fmt.Errorf("pgctl: appending to postgresql.conf: %w", werr)
			}
		}
		startErr = c.run(ctx, filepath.Join(c.binDir, "pg_ctl"),
			"start", "-w", "-t", "60", "-D", c.dataDir, "-l", c.logFile)
		if startErr == nil {
			return c.waitReady(ctx)
		}
		if !strings.Contains(c.logTail(), "could not bind") {
			break
		}
	}
	return fmt.Errorf("pgctl: pg_ctl start: %w\nserver log:\n%s", startErr, c.logTail())
}

// config renders the harness's postgresql.conf additions: speed over safety,
// a private socket directory and the chosen port.
func (c *Instance) config(extra map[string]string) string {
	var b strings.Builder
	b.WriteString("# written by pgtest; the data is disposable, so durability is off\n")
	set := func(k, v string) { fmt.Fprintf(&b, "%s = %s\n", k, quoteConfValue(v)) }
	set("listen_addresses", "127.0.0.1")
	set("port", strconv.Itoa(c.port))
	set("unix_socket_directories", c.sockDir)
	set("fsync", "off")
	set("synchronous_commit", "off")
	set("full_page_writes", "off")
	set("shared_buffers", "32MB")
	set("max_connections", "100")
	set("wal_level", "replica")
	set("max_wal_size", "1GB")
	set("wal_init_zero", "off")
	set("password_encryption", "scram-sha-256")
	set("logging_collector", "off")
	set("lc_messages", "C")
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		set(k, extra[k])
	}
	return b.String()
}

// waitReady confirms with a real login that the server accepts
// connections; pg_ctl -w only checks the postmaster.pid status line.
func (c *Instance) waitReady(ctx context.Context) error {
	var lastErr error
	for i := 0; i < 100; i++ {
		conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgctl: waiting for server: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("pgctl: server does not accept connections: %w\nserver log:\n%s", lastErr, c.logTail())
}

// Close stops the server with an immediate shutdown (the data is thrown away,
// so a clean checkpoint would only waste time) and removes its directory. It
// is safe to call more than once; later calls return the first result.
func (c *Instance) Close() error {
	c.closeOnce.Do(func() {
		var errs []error
		if _, err := os.Stat(filepath.Join(c.dataDir, "postmaster.pid")); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := c.run(ctx, filepath.Join(c.binDir, "pg_ctl"), "stop", "-w", "-m", "immediate", "-D", c.dataDir)
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("pgctl: pg_ctl stop: %w", err))
			}
		}
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, fmt.Errorf("pgctl: removing %s: %w", c.dir, err))
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// Restart restarts the server with a fast shutdown (pg_ctl restart -m
// fast): every session is terminated, as when a production server is
// restarted under a running client, and the server comes back on the same
// port and socket, usable by later tests.
func (c *Instance) Restart(ctx context.Context) error {
	if err := c.run(ctx, filepath.Join(c.binDir, "pg_ctl"), "restart", "-w", "-t", "60", "-m", "fast", "-D", c.dataDir, "-l", c.logFile); err != nil {
		return fmt.Errorf("pgctl: pg_ctl restart: %w\nserver log:\n%s", err, c.logTail())
	}
	return c.waitReady(ctx)
}

// BinDir is the directory of the binaries this cluster runs, so that tests
// use the matching pg_dump/psql.
func (c *Instance) BinDir() string { return c.binDir }

// Version is the server's major version (e.g. 15), for tests whose
// expectations depend on it.
func (c *Instance) Version() int { return c.version }

// Port is the TCP port, which is also the number in the unix socket's name.
func (c *Instance) Port() int { return c.port }

// SocketDir is the directory holding the unix socket, i.e. the libpq "host"
// of local connections.
func (c *Instance) SocketDir() string { return c.sockDir }

// run executes a server-side binary as the server's OS user, in the
// cluster directory (the postgres user may not be able to read the test's
// working directory).
func (c *Instance) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = c.dir
	cmd.Env = serverEnv()
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
		if u, err := user.LookupId(strconv.Itoa(int(c.cred.Uid))); err == nil {
			cmd.Env = append(cmd.Env, "HOME="+u.HomeDir, "USER="+u.Username, "LOGNAME="+u.Username)
		}
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// pg_ctl's postmaster must not keep our pipes open; -l redirects it,
	// but WaitDelay guarantees Wait returns even if something does.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, tail(out.String(), 4000))
	}
	return nil
}

// writeOwned writes a file in the data directory and hands it to the server
// user, which refuses to read configuration it cannot access.
func (c *Instance) writeOwned(path, content string) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return fmt.Errorf("pgctl: writing %s: %w", path, err)
	}
	if c.cred != nil {
		if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("pgctl: chown %s: %w", path, err)
		}
	}
	return nil
}

func (c *Instance) logTail() string {
	b, err := os.ReadFile(c.logFile)
	if err != nil {
		return fmt.Sprintf("(no server log: %v)", err)
	}
	return tail(string(b), 4000)
}

// ServerCredential returns the identity to run initdb/pg_ctl under (and to
// own files the server must read, such as TLS keys): nil (the
// current user) unless we are root, which initdb refuses, in which case the
// OS user "postgres".
func ServerCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgctl: running as root, and initdb refuses root, but there is no OS user \"postgres\": %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgctl: parsing uid %q of user postgres: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgctl: parsing gid %q of user postgres: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// CleanEnv is the process environment without PG* variables, so that a
// developer's PGHOST, PGPASSWORD or PGSERVICE cannot redirect the harness's
// own commands; client encoding is pinned to UTF8.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PGCLIENTENCODING=UTF8", "PGCONNECT_TIMEOUT=10")
}

// serverEnv is cleanEnv for initdb, pg_ctl and the server, without
// PGCLIENTENCODING: a postmaster takes it as every session's default
// client_encoding, which would hide that a real server's default is each
// database's own encoding.
func serverEnv() []string {
	var env []string
	for _, kv := range CleanEnv() {
		if !strings.HasPrefix(kv, "PGCLIENTENCODING=") {
			env = append(env, kv)
		}
	}
	return env
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgctl: finding a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("pgctl: releasing probe port: %w", err)
	}
	return port, nil
}

// isConfName accepts the characters of PostgreSQL parameter names
// (including dotted custom "ext.name" ones), so a setting cannot inject
// further configuration lines.
func isConfName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func quoteConfValue(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `''`, "\n", `\n`, "\r", `\r`)
	return "'" + r.Replace(v) + "'"
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
