package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/store/remotetest"
)

// TestS3Faults: each problem fails with one line naming the object and the
// right exit code, and never prints the secret (nor a URL's signature); a
// damaged object is refused; an existing object is kept without
// --overwrite; a dump that fails leaves nothing behind. The round trips
// through s3:// and https are internal/restore's TestS3RoundTrip.
func TestS3Faults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := remotetest.StartS3(t)
	c := shared(t)
	const src = "faults"
	if err := c.CreateDB(ctx, src); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, src, `CREATE TABLE t AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	bucket := srv.Bucket(t)
	env := srv.Env(srv.Endpoint)
	good := "s3://" + bucket + "/good.pgs"
	if r := pgsprint(t, env, "dump", "-d", c.ConnString(src), "-f", good, "-q"); r.code != 0 {
		t.Fatalf("dump: %s", r.stderr)
	}
	archive, err := os.ReadFile(srv.Path(bucket, "good.pgs"))
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string, data []byte) string {
		if err := os.WriteFile(srv.Path(bucket, key), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return "s3://" + bucket + "/" + key
	}
	flipped := append([]byte(nil), archive...)
	flipped[len(flipped)/2] ^= 0x40
	truncatedLoc := put("truncated.pgs", archive[:len(archive)-100])
	flippedLoc := put("flipped.pgs", flipped)

	wrongSecret := append(append([]string(nil), env...), "AWS_SECRET_ACCESS_KEY=wrong-secret")
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }))
	defer imds.Close()
	noCredentials := append(append([]string(nil), env...), "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=",
		"AWS_EC2_METADATA_DISABLED=false", "AWS_EC2_METADATA_SERVICE_ENDPOINT="+imds.URL)
	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"wrong secret restore", wrongSecret, []string{"restore", "-f", good, "-d", c.ConnString(src), "-q"}, exitConnection, good + ": the server refused the request signature: wrong secret access key? (SignatureDoesNotMatch)"},
		{"wrong secret dump", wrongSecret, []string{"dump", "-d", c.ConnString(src), "-f", "s3://" + bucket + "/new.pgs", "-q"}, exitConnection, "SignatureDoesNotMatch"},
		{"endpoint refused", append(append([]string(nil), env...), "AWS_ENDPOINT_URL=http://127.0.0.1:1"), []string{"list", good}, exitConnection, good + ": opening: cannot reach the S3 endpoint"},
		{"missing key", env, []string{"list", "s3://" + bucket + "/absent.pgs"}, exitFailure, "s3://" + bucket + "/absent.pgs: archive not found"},
		{"missing bucket", env, []string{"verify", "s3://no-such-bucket/a.pgs"}, exitFailure, `s3://no-such-bucket/a.pgs: bucket "no-such-bucket" does not exist`},
		{"missing bucket dump", env, []string{"dump", "-d", c.ConnString(src), "-f", "s3://no-such-bucket/a.pgs", "-q"}, exitFailure, `bucket "no-such-bucket" does not exist`},
		{"existing object without --overwrite", env, []string{"dump", "-d", c.ConnString(src), "-f", good, "-q"}, exitFailure, good + ": archive already exists (use --overwrite to replace it)"},
		{"dump to https", env, []string{"dump", "-d", c.ConnString(src), "-f", "http://127.0.0.1:1/a.pgs?X-Amz-Signature=sekrit", "-q"}, exitFailure, "cannot write an archive to an http(s) URL"},
		{"no key in location", env, []string{"list", "s3://" + bucket}, exitFailure, "no object key"},
		{"truncated", env, []string{"verify", truncatedLoc}, exitFailure, truncatedLoc},
		{"byte flipped", env, []string{"verify", flippedLoc}, exitFailure, flippedLoc},
		{"byte flipped restore", env, []string{"restore", "-f", flippedLoc, "-d", c.ConnString(src), "--clean", "-q"}, exitFailure, "archive on " + flippedLoc + " is damaged: restore table"},
		// No credentials anywhere, and an instance metadata service that
		// refuses IMDSv2 tokens: the SDK's "WARN falling back to IMDSv1"
		// line must not come before the one error line.
		{"no credentials", noCredentials, []string{"list", good}, exitConnection, good},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := pgsprint(t, tc.env, tc.args...)
			msg := strings.TrimSpace(r.stderr)
			if r.code != tc.code || !strings.Contains(msg, tc.want) {
				t.Fatalf("exit %d (want %d): %s\nwant %q", r.code, tc.code, msg, tc.want)
			}
			t.Logf("exit %d: %s", r.code, msg)
			if strings.Contains(msg, "\n") || strings.Contains(msg, "wrong-secret") || strings.Contains(msg, "sekrit") || strings.Contains(msg, remotetest.SecretKey) {
				t.Errorf("not one line, or a secret printed: %s", msg)
			}
		})
	}
	// --s3-endpoint wins over AWS_ENDPOINT_URL.
	badEnv := append(append([]string(nil), env...), "AWS_ENDPOINT_URL=http://127.0.0.1:1")
	if r := pgsprint(t, badEnv, "list", "--s3-endpoint", srv.Endpoint, good); r.code != 0 {
		t.Errorf("list with --s3-endpoint: exit %d: %s", r.code, r.stderr)
	}
	if up := srv.OpenUploads(t, bucket); len(up) != 0 {
		t.Errorf("open uploads left: %v", up)
	}
	keys := strings.Join(srv.Objects(t, bucket), " ")
	if keys != "flipped.pgs good.pgs truncated.pgs" {
		t.Errorf("objects: %s", keys)
	}
}

// TestS3DumpInterrupted: a dump to s3:// stopped by Ctrl-C, or whose
// server dies mid-upload for longer than the retries last, fails and
// leaves no object and no open multipart upload (the abort is retried
// until the server is back); a server back within the retries costs
// nothing: the dump completes, exact.
func TestS3DumpInterrupted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := remotetest.StartS3(t)
	c := shared(t)
	const src = "interrupted"
	if err := c.CreateDB(ctx, src); err != nil {
		t.Fatal(err)
	}
	// About 30 MB of COPY text: several 5 MB parts uncompressed.
	if err := c.Exec(ctx, src, `CREATE TABLE t AS SELECT g AS id, md5(g::text) || md5((-g)::text) AS v FROM generate_series(1, 400000) g`); err != nil {
		t.Fatal(err)
	}
	bucket := srv.Bucket(t)
	loc := "s3://" + bucket + "/cut.pgs"
	for _, tc := range []struct {
		name   string
		act    func(cmd *exec.Cmd, aborting <-chan struct{})
		code   int
		stderr string
	}{
		{"ctrl-c", func(cmd *exec.Cmd, _ <-chan struct{}) { cmd.Process.Signal(syscall.SIGINT) }, exitInterrupted, "interrupted"},
		{"server down", func(_ *exec.Cmd, aborting <-chan struct{}) {
			srv.Kill()
			<-aborting // the dump gave up and aborts the upload, in vain so far
			srv.Start()
		}, exitFailure, loc + ": uploading part"},
		{"server back in time", func(*exec.Cmd, <-chan struct{}) {
			srv.Kill()
			time.Sleep(500 * time.Millisecond)
			srv.Start()
		}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			firstPart, aborting := make(chan struct{}), make(chan struct{})
			var once, abortOnce sync.Once
			proxy := remotetest.NewProxy(t, srv.Endpoint)
			proxy.SetFaults(func(r *http.Request, n int) remotetest.Fault {
				switch {
				case r.URL.Query().Has("partNumber"):
					once.Do(func() { close(firstPart) })
				case r.Method == http.MethodDelete && r.URL.Query().Has("uploadId"):
					abortOnce.Do(func() { close(aborting) })
				}
				return remotetest.Pass
			})
			cmd, stderr := startPgsprintEnv(t, srv.Env(proxy.URL), "dump", "-d", c.ConnString(src), "-f", loc,
				"-Z", "none", "--s3-part-size", "5MB", "--s3-uploads", "2", "-q", "--overwrite")
			select {
			case <-firstPart:
			case <-time.After(time.Minute):
				t.Fatal("no part was uploaded")
			}
			tc.act(cmd, aborting)
			code := waitExit(t, cmd)
			if tc.code == 0 {
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				if r := pgsprint(t, srv.Env(srv.Endpoint), "verify", loc); r.code != 0 {
					t.Fatalf("verify: %s", r.stderr)
				}
				return
			}
			checkOneError(t, code, tc.code, stderr.String(), tc.stderr)
			if keys, up := srv.Objects(t, bucket), srv.OpenUploads(t, bucket); len(keys)+len(up) != 0 {
				t.Fatalf("left behind: objects %v, uploads %v", keys, up)
			}
		})
	}
}

// TestS3Resume: a restore from s3:// SIGKILLed while it loads data is
// finished by --resume from the same object, exactly: schema and data
// equal to the source, no journal left.
func TestS3Resume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := remotetest.StartS3(t)
	c := shared(t)
	if err := c.CreateDB(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "src", resumeSource); err != nil {
		t.Fatal(err)
	}
	env := srv.Env(srv.Endpoint)
	loc := "s3://" + srv.Bucket(t) + "/resume.pgs"
	if r := pgsprint(t, env, "dump", "-d", c.ConnString("src"), "-f", loc, "--chunk-size", "4MB", "-Z", "lz4", "-q"); r.code != 0 {
		t.Fatalf("dump: %s", r.stderr)
	}
	if err := c.CreateDB(ctx, "dst"); err != nil {
		t.Fatal(err)
	}
	target, err := pgx.Connect(ctx, c.ConnString("dst"))
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close(ctx)
	args := []string{"restore", "-f", loc, "-d", c.ConnString("dst"), "-j", "3", "--split-min-bytes", "2000000", "-q"}
	cmd, stderr := startPgsprintEnv(t, env, args...)
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	for deadline := time.Now().Add(2 * time.Minute); !journalHas(target, "pre-data"); time.Sleep(5 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("the restore ended before loading data: %s", stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no pre-data step journaled within 2 minutes")
		}
	}
	time.Sleep(100 * time.Millisecond)
	cmd.Process.Kill()
	<-exited
	if cmd.ProcessState.Success() {
		t.Log("the restore finished before the kill")
	}
	if r := pgsprint(t, env, append(args, "--resume")...); r.code != 0 {
		t.Fatalf("resume: exit %d: %s", r.code, r.stderr)
	}
	requireNoJournal(t, target)
	pgtest.RequireSameSchema(t, c.BinDir(), c.ConnString("src"), c.ConnString("dst"))
	pgtest.RequireSameData(t, c.ConnString("src"), c.ConnString("dst"))
}
