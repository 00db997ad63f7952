package main

import (
	"context"
	bin "encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestMessages: each failure a user met with a message that named the
// wrong cause (issue 33) now names the true one and the next step, in one
// line, with the exit code of its kind: the bytes a cut pipe delivered,
// pg_dump's formats and the tool that reads each, a damaged header or
// trailer as damage rather than a future version or a truncation, the
// damaged frame of an encrypted pipe rather than "extract schema", a
// passphrase archive opened with an identity, a clone's source rather than
// "the archive", every database excluded, an -L list that keeps a foreign
// key without the rows it refers to, and -f for list and verify.
func TestMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := shared(t)
	const src = "msgs"
	if err := c.CreateDB(ctx, src); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, src, `CREATE TABLE t (id int PRIMARY KEY, v text);
INSERT INTO t SELECT i, repeat(md5(i::text), 4) FROM generate_series(1, 5000) i;
CREATE TABLE u (id int PRIMARY KEY, t int REFERENCES t);
INSERT INTO u SELECT i, i FROM generate_series(1, 100) i;`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	write := func(name string, data []byte) string {
		if err := os.WriteFile(path(name), data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path(name)
	}
	good := path("good.pgs")
	mustPgsprint(t, "dump", "-d", c.ConnString(src), "-f", good, "-q")
	archive, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	version := bin.LittleEndian.Uint32(archive[8:]) // what a flip of bit 16 turns into version|1<<16
	flip := func(name string, data []byte, at int) string {
		d := append([]byte(nil), data...)
		d[at] ^= 0x01
		return write(name, d)
	}
	passFile := write("pass.txt", []byte("a passphrase\n"))
	idFile, public, _ := writeIdentity(t, dir, "id.txt")
	sealed, toKey := path("sealed.pgs"), path("to-key.pgs")
	mustPgsprint(t, "dump", "-d", c.ConnString(src), "-f", sealed, "--passphrase-file", passFile, "-q")
	mustPgsprint(t, "dump", "-d", c.ConnString(src), "-f", toKey, "--encrypt-to", public, "-q")
	toKeyBytes, err := os.ReadFile(toKey)
	if err != nil {
		t.Fatal(err)
	}
	// The first frame's payload (after the fixed header, the manifest's
	// envelope and its checksum, and the frame's 32-byte header): a pipe
	// meets it before the schema stream, whichever stream it is.
	firstPayload := 16 + int(bin.LittleEndian.Uint32(toKeyBytes[12:])) + 4 + 32 + 8
	pgDump := filepath.Join(c.BinDir(), "pg_dump")
	for _, f := range []struct{ name, format string }{{"base.dump", "c"}, {"base.dir", "d"}, {"base.tar", "t"}, {"base.sql", "p"}} {
		if out, err := exec.Command(pgDump, "-F", f.format, "-f", path(f.name), "-d", c.ConnString(src)).CombinedOutput(); err != nil {
			t.Fatalf("pg_dump -F%s: %v\n%s", f.format, err, out)
		}
	}
	list := mustPgsprint(t, "restore", "-f", good, "-l").stdout
	var keep []string
	for _, l := range strings.Split(list, "\n") {
		if !strings.Contains(l, "TABLE DATA public t ") {
			keep = append(keep, l)
		}
	}
	noRowsOfT := write("no-rows-of-t.list", []byte(strings.Join(keep, "\n")))
	empty := func(name string) string {
		if err := c.CreateDB(ctx, name); err != nil {
			t.Fatal(err)
		}
		return c.ConnString(name)
	}

	notOurs := empty("notours")
	if err := c.Exec(ctx, "notours", "CREATE SCHEMA pgsprint_journal; CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'mine')"); err != nil {
		t.Fatal(err)
	}

	// A data-only target whose trigger keeps a row out: the count differs,
	// and the table is named once.
	skips := empty("skips")
	if err := c.Exec(ctx, "skips", `CREATE TABLE t (id int PRIMARY KEY, v text);
CREATE FUNCTION skip_one() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN IF NEW.id = 1 THEN RETURN NULL; END IF; RETURN NEW; END$$;
CREATE TRIGGER skip_one BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION skip_one();`); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name  string
		args  []string
		stdin string // file to read as standard input
		code  int
		want  string
		not   string // a wrong cause the message once named
	}{
		// Item 1: the bytes that arrived, said once.
		{"cut pipe names the bytes that arrived", []string{"restore", "-f", "-", "-d", empty("cut1"), "-q"}, write("cut1000.pgs", archive[:1000]), exitFailure,
			"archive on standard input is incomplete: the input ended after 1000 bytes, before the archive's trailer", "extract schema"},
		// Item 2: the advice the next run gives, --resume, at once.
		{"cut before the trailer advises --resume", []string{"restore", "-f", "-", "-d", empty("cut2"), "-q"}, write("cut-end.pgs", archive[:len(archive)-10]), exitFailure,
			"the target is partly restored: restore the whole archive with --resume to finish it, or with --clean to start over", ""},
		// Issue 42 item 9: a damaged file, as a cut pipe, says the target
		// is partly restored and how to finish it.
		{"damaged file advises --resume", []string{"restore", "-f", flip("damaged.pgs", archive, len(archive)/2), "-d", empty("damaged"), "-q"}, "", exitFailure,
			"the target is partly restored: restore an undamaged copy of the archive with --resume to finish it, or with --clean to start over", ""},
		// Item 4: -f as everywhere else.
		{"list -f and another archive", []string{"list", "-f", good, sealed}, "", exitUsage, "-f " + good + " and the argument " + sealed + " name two archives", ""},
		{"verify without an archive", []string{"verify"}, "", exitUsage, "no archive given: name it with -f FILE or as the argument", ""},
		// Item 5: pg_dump's formats, and the tool that reads each.
		{"pg_dump -Fc", []string{"restore", "-f", path("base.dump"), "-d", c.ConnString("postgres")}, "", exitFailure, "it is a pg_dump custom-format archive (pg_dump -Fc): restore it with pg_restore", ""},
		{"pg_dump -Fc on standard input", []string{"list", "-"}, path("base.dump"), exitFailure, "archive on standard input: not a pgsprint archive: it is a pg_dump custom-format archive", ""},
		{"pg_dump -Fd", []string{"verify", "-f", path("base.dir")}, "", exitFailure, "it is a pg_dump directory-format archive (pg_dump -Fd, it holds toc.dat): restore it with pg_restore", ""},
		{"pg_dump -Ft", []string{"list", path("base.tar")}, "", exitFailure, "it is a pg_dump tar-format archive (pg_dump -Ft): restore it with pg_restore", ""},
		{"pg_dump plain", []string{"restore", "-f", path("base.sql"), "-d", c.ConnString("postgres")}, "", exitFailure, "it is a plain SQL script from pg_dump or pg_dumpall: run it with psql -f FILE", ""},
		// Nothing, or another file: said so, not a bare "not a pgsprint archive".
		{"empty file", []string{"list", write("empty.pgs", nil)}, "", exitFailure,
			"archive on " + path("empty.pgs") + ": not a pgsprint archive: it is empty (0 bytes): the dump meant to write it wrote nothing", ""},
		{"empty pipe", []string{"restore", "-f", "-", "-d", c.ConnString("postgres"), "-q"}, write("empty-pipe.pgs", nil), exitFailure,
			"archive on standard input: not a pgsprint archive: it is empty (0 bytes)", "EOF"},
		{"a text file", []string{"verify", write("notes.txt", []byte("some notes, not an archive\n"))}, "", exitFailure,
			`not a pgsprint archive: it is a file of another kind: it begins with "some not", a pgsprint archive with "PGSPRNT\x00" (check the name given to -f)`, ""},
		// A schema named as our journal that is not one: refused before
		// --clean drops anything (the target keeps its table).
		{"a schema pgsprint_journal not ours", []string{"restore", "-f", good, "-d", notOurs, "--clean", "-q"}, "", exitFailure,
			`the target database holds a schema "pgsprint_journal" that is not a pgsprint journal (pgsprint keeps its restore journal under that name): rename or drop it`, "already exists"},
		// Item 6: the server, and why each database was skipped.
		{"every database excluded", []string{"dump", "--all", "-d", c.ConnString("postgres"), "--exclude-database", "*", "-f", path("all.pgs"), "-q"}, "", exitUsage,
			"excluded by --exclude-database: ", `on database "postgres"`},
		// clone --all refuses the same selection as dump --all, rather
		// than copy the globals alone and exit 0.
		{"every database excluded, clone --all", []string{"clone", "--all", "--source", c.ConnString("postgres"), "--target", c.ConnString("postgres"), "--exclude-database", "*", "-q"}, "", exitUsage,
			"no database to clone on the server at ", "same server"},
		// Item 9: damage named as damage, keys by kind, the clone's source.
		{"version field flipped", []string{"list", flip("version.pgs", archive, 10)}, "", exitFailure, fmt.Sprintf("archive on %s: the header is damaged: its format version field reads %d, the trailer's %d", path("version.pgs"), version|1<<16, version), "newer"},
		{"version field flipped, pipe", []string{"verify", "-"}, flip("version-pipe.pgs", archive, 10), exitFailure, fmt.Sprintf("archive on standard input: the header is damaged: its format version field reads %d, which no pgsprint writes", version|1<<16), "newer"},
		{"trailer magic flipped", []string{"restore", "-f", flip("trailer.pgs", archive, len(archive)-1), "-d", c.ConnString("postgres")}, "", exitFailure, "archive on " + path("trailer.pgs") + ": the trailer is damaged: its magic changed", "incomplete"},
		{"damaged frame, encrypted pipe", []string{"restore", "-f", "-", "-d", empty("sealed"), "--identity", idFile, "-q"}, flip("to-key-flip.pgs", toKeyBytes, firstPayload), exitFailure,
			"archive on standard input is damaged: stream ", "extract schema"},
		{"passphrase archive, an identity given", []string{"list", sealed, "--identity", idFile}, "", exitFailure,
			"archive on " + sealed + " is encrypted with a passphrase, not to an age identity: give its passphrase (--passphrase-file FILE or PGSPRINT_PASSPHRASE) instead of --identity", "does not match"},
		{"clone -t nomatch", []string{"clone", "--source", c.ConnString(src), "--target", empty("clonet"), "-t", "nomatch", "-q"}, "", exitFailure,
			`no matching tables were found in the source database "` + c.Name(src) + `"`, "archive"},
		// Files named once, by the flag that names them.
		{"missing archive", []string{"list", path("nope.pgs")}, "", exitFailure, "open archive " + path("nope.pgs") + ": no such file or directory", "open archive: open"},
		{"missing directory", []string{"dump", "-d", c.ConnString(src), "-f", path("no/such/x.pgs"), "-q"}, "", exitFailure,
			"create archive " + path("no/such/x.pgs") + ": directory " + path("no/such") + " does not exist", ".partial"},
		{"missing -L list", []string{"restore", "-f", good, "-L", path("nope.list"), "-d", c.ConnString("postgres")}, "", exitFailure, "-L " + path("nope.list") + ": no such file or directory", "read list"},
		{"missing identity file", []string{"list", sealed, "--identity", path("nope.key")}, "", exitFailure, "--identity: " + path("nope.key") + ": no such file or directory", "identity file"},
		{"a trigger keeps rows out of a data-only restore", []string{"restore", "-f", good, "--data-only", "-t", "t", "-d", skips, "-q"}, "", exitFailure,
			`: loaded 4999 rows, archive holds 5000: a trigger on the target table kept rows out (restore with --disable-triggers, or drop the trigger)`, "): restore table"},
		// A rule naming no table is a usage error, as an unknown --mask table.
		{"--subset of no table", []string{"dump", "-d", c.ConnString(src), "--subset", "public.Nope: id < 5", "-f", path("subset.pgs"), "-q"}, "", exitUsage,
			`--subset: no table public.Nope in the source database (unquoted names fold to lower case: double-quote a name that has capitals, as "Schema"."Table")`, "public.Nope: no table"},
		// Item 11: the error and its constraint, the detail, the fix.
		{"-L keeps a foreign key without its rows", []string{"restore", "-f", good, "-L", noRowsOfT, "-d", empty("fk"), "-q"}, "", exitFailure,
			`violates foreign key constraint "u_t_fkey"; Key (t)=(1) is not present in table "t". (the -L list keeps this foreign key but not all the rows it refers to`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := pgsprintStdinFile(t, tc.stdin, tc.args...)
			t.Logf("exit %d: %s", r.code, strings.TrimSpace(r.stderr))
			if r.code != tc.code {
				t.Errorf("exit code %d, want %d", r.code, tc.code)
			}
			checkOneLine(t, r.stderr)
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("error does not say %q", tc.want)
			}
			if tc.not != "" && strings.Contains(r.stderr, tc.not) {
				t.Errorf("error still says %q", tc.not)
			}
			// Said once: the archive, its damage, the error's prefix.
			for _, twice := range []string{"archive on standard input: archive", ": archive: ", "(corrupted archive)", "error: error", "damaged: archive"} {
				if strings.Contains(r.stderr, twice) {
					t.Errorf("error repeats itself: %q", twice)
				}
			}
		})
	}

	if got := pgtest.Scalar(t, notOurs, "SELECT string_agg(v, ',') FROM t"); got != "mine" {
		t.Errorf("the refused --clean restore changed the target's table t: %q", got)
	}

	t.Run("-f for list and verify", func(t *testing.T) {
		for _, args := range [][]string{{"list", "-f", good}, {"verify", "-f", good}, {"list", "-f", good, good}} {
			if r := pgsprint(t, nil, args...); r.code != 0 || !strings.Contains(r.stdout, `"public"."t"`) && !strings.Contains(r.stdout, "sound") {
				t.Errorf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
			}
		}
	})

	t.Run("--resume finishes what the cut pipe left", func(t *testing.T) {
		// After the cut of "cut before the trailer advises --resume".
		r := pgsprintStdinFile(t, good, "restore", "-f", "-", "-d", c.ConnString("cut2"), "--resume", "-q")
		if r.code != 0 {
			t.Fatalf("restore --resume: exit %d: %s", r.code, r.stderr)
		}
		pgtest.RequireData(t, c.ConnString(src), c.ConnString("cut2"), "public.t", "public.u")
	})

	// Item 7: "raw" is the COPY data moved, and the summary says in
	// which format: an archive holds text, a clone between servers of one
	// major moves binary, and the same rows differ in size.
	t.Run("raw names its COPY format", func(t *testing.T) {
		d := mustPgsprint(t, "dump", "-d", c.ConnString(src), "-f", path("raw.pgs"))
		cl := mustPgsprint(t, "clone", "--source", c.ConnString(src), "--target", empty("rawclone"))
		for _, tc := range []struct{ out, want string }{{d.stderr, " raw (COPY text), "}, {cl.stderr, " raw (COPY binary); "}} {
			if !strings.Contains(tc.out, tc.want) {
				t.Errorf("summary lacks %q:\n%s", tc.want, tc.out)
			}
		}
	})
}

// pgsprintStdinFile runs the binary with the file stdin (none if "") as
// standard input.
func pgsprintStdinFile(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	if stdin == "" {
		return pgsprint(t, nil, args...)
	}
	f, err := os.Open(stdin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return pgsprintStdin(t, nil, f, args...)
}
