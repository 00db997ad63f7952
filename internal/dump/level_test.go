package dump

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// TestAutoLevel dumps one table with the default zstd auto twice: once
// through a proxy that sends the server's bytes at 1 MiB/s a connection
// (the server is the bound: the workers wait for rows, 16 ms a frame,
// enough that an encoder delayed by a loaded test machine still takes
// less than half of it), and once straight from the
// server with an encoder slowed to a few MB/s (compression holds the
// workers back). The first must climb above level 2 and the second stay
// at level 1; the first archive, of mixed levels, must restore to the
// same rows.
func TestAutoLevel(t *testing.T) {
	c := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const db = "autolevel"
	if err := c.CreateDB(ctx, db); err != nil {
		t.Fatal(err)
	}
	// About 1.6 MiB of COPY text: 100 frames of 16 KiB, enough for
	// the controller's windows to climb to level 5.
	if err := c.Exec(ctx, db, `
		CREATE TABLE t (id int PRIMARY KEY, note text, n numeric);
		INSERT INTO t SELECT i, md5(i::text) || ' ' || (i % 977), i * 1.5 FROM generate_series(1, 30000) i;
		ANALYZE;`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dump := func(name string, cfg *pgx.ConnConfig, slow time.Duration) (*codec.ZstdAuto, string) {
		t.Helper()
		z := codec.NewZstdAuto()
		z.WatchMachine(nil) // the ratios alone: the test machine's load is not the dump's
		var c codec.Codec = z
		if slow > 0 {
			c = slowEncoder{z, slow}
		}
		file := filepath.Join(dir, name+".pgs")
		opts := Options{Source: cfg, File: file, Jobs: 2, Codec: c, BlockSize: 16 << 10, Version: "test"}
		if _, err := Run(ctx, opts); err != nil {
			t.Fatalf("%s: dump: %v", name, err)
		}
		t.Logf("%s: %s", name, z.Describe())
		return z, file
	}

	proxy := throttledSocket(t, c.SocketDir(), c.Port(), 1<<20)
	slowCfg, err := pgx.ParseConfig(pgtest.KeywordConnString(map[string]string{
		"host": proxy, "port": strconv.Itoa(c.Port()), "user": "postgres", "dbname": db}))
	if err != nil {
		t.Fatal(err)
	}
	slowCfg.User = mustConfig(t, c.ConnString(db)).User
	serverBound, file := dump("server-bound", slowCfg, 0)
	heldBack, _ := dump("held-back", mustConfig(t, c.ConnString(db)), 5*time.Millisecond)

	top := func(z *codec.ZstdAuto) int {
		us := z.Used()
		if len(us) == 0 {
			t.Fatal("nothing compressed")
		}
		return us[len(us)-1].Level
	}
	if len(serverBound.Used()) < 2 || top(serverBound) <= 2 {
		t.Errorf("server-bound dump used %s, want several levels reaching above 2", serverBound.Describe())
	}
	if top(heldBack) != 1 {
		t.Errorf("held-back dump used %s, want level 1 only", heldBack.Describe())
	}

	// The mixed-level archive restores to the same rows.
	const target = "autolevel_restored"
	if err := c.CreateDB(ctx, target); err != nil {
		t.Fatal(err)
	}
	af, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer af.Close()
	st, err := af.Stat()
	if err != nil {
		t.Fatal(err)
	}
	ar, err := archive.Open(af, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if r := ar.Manifest().LevelAuto; r == nil || r.Min != 1 {
		t.Errorf("manifest level_auto = %+v, want a range from 1", r)
	}
	if _, err := restore.Run(ctx, ar, restore.Options{Target: mustConfig(t, c.ConnString(target)), Jobs: 2, Settings: restore.Settings{NoAnalyze: true}}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	pgtest.RequireSameData(t, c.ConnString(db), c.ConnString(target))
}

func mustConfig(t *testing.T, conn string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(conn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// slowEncoder is zstd auto whose every block takes delay more to
// compress: an encoder slower than the server.
type slowEncoder struct {
	*codec.ZstdAuto
	delay time.Duration
}

func (s slowEncoder) Compress(dst, src []byte) ([]byte, error) {
	time.Sleep(s.delay)
	return s.ZstdAuto.Compress(dst, src)
}

// throttledSocket listens on a unix socket named for port in a new
// directory, which it returns (a libpq host), and forwards each
// connection to the server's socket in sockDir, sending the server's
// bytes to the client at rate bytes a second per connection: a server
// slower than its client.
func throttledSocket(t *testing.T, sockDir string, port int, rate int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgs-throttle")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	name := ".s.PGSQL." + strconv.Itoa(port)
	l, err := net.Listen("unix", filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			client, err := l.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("unix", filepath.Join(sockDir, name))
			if err != nil {
				client.Close()
				continue
			}
			go func() {
				io.Copy(server, client)
				server.Close()
			}()
			go func() {
				throttle(client, server, rate)
				client.Close()
			}()
		}
	}()
	return dir
}

// throttle copies src to dst at no more than rate bytes a second.
func throttle(dst io.Writer, src io.Reader, rate int) {
	buf := make([]byte, 8<<10)
	start := time.Now()
	var sent int64
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			sent += int64(n)
			if d := time.Duration(float64(sent)/float64(rate)*float64(time.Second)) - time.Since(start); d > 0 {
				time.Sleep(d)
			}
		}
		if err != nil {
			return
		}
	}
}
