// Package remotetest holds the real parts that the remote stores' tests
// run against: an S3 server (versitygw over a temporary directory) on
// 127.0.0.1, started by the test, and a fault-injecting HTTP proxy to put
// in front of it or of any web server. No S3 API is mocked.
package remotetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// Credentials of the test server's root user; test-only values.
const (
	AccessKey = "pgsprint-test"
	SecretKey = "pgsprint-test-secret"
)

// S3Server is a versitygw gateway over a directory, on 127.0.0.1.
type S3Server struct {
	// Endpoint is the server's URL, http://127.0.0.1:PORT.
	Endpoint string
	t        testing.TB
	bin, dir string
	addr     string

	mu  sync.Mutex // a test may restart the server from another goroutine
	cmd *exec.Cmd
}

// VersitygwBin finds versitygw on PATH or in Go's bin directory, where
// scripts/ensure-deps.sh installs it.
func VersitygwBin() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		home, _ := os.UserHomeDir()
		gopath = filepath.Join(home, "go")
	}
	for _, dir := range []string{os.Getenv("GOBIN"), filepath.Join(gopath, "bin")} {
		p := filepath.Join(dir, "versitygw")
		if st, err := os.Stat(p); dir != "" && err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("versitygw not found on PATH or in $GOPATH/bin (scripts/ensure-deps.sh installs it)")
}

// StartS3 starts a server for the test and stops it at its end. Without
// versitygw the test is skipped, or fails when pgtest.EnvRequire is set.
func StartS3(t testing.TB) *S3Server {
	t.Helper()
	bin, err := VersitygwBin()
	if err != nil {
		if os.Getenv(pgtest.EnvRequire) != "" {
			t.Fatalf("%v (%s is set)", err, pgtest.EnvRequire)
		}
		t.Skipf("skipping: %v", err)
	}
	s := &S3Server{t: t, bin: bin, dir: t.TempDir()}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	l.Close()
	s.Endpoint = "http://" + s.addr
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Start starts (or restarts, on the same address and directory) the
// server and waits until it accepts connections.
func (s *S3Server) Start() {
	s.t.Helper()
	cmd := exec.Command(s.bin, "--quiet", "--port", s.addr, "posix", s.dir)
	// The root user's keys go in the environment, not on a command line.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+AccessKey, "ROOT_SECRET_ACCESS_KEY="+SecretKey)
	logf, err := os.Create(filepath.Join(s.t.TempDir(), "versitygw.log"))
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting versitygw: %v", err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	go func() { cmd.Wait(); logf.Close() }()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", s.addr); err == nil {
			c.Close()
			return
		}
	}
	log, _ := os.ReadFile(logf.Name())
	s.t.Fatalf("versitygw did not listen on %s: %s", s.addr, log)
}

// Kill stops the server at once, as a crash would.
func (s *S3Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		for i := 0; i < 100; i++ {
			if c, err := net.Dial("tcp", s.addr); err != nil {
				break
			} else {
				c.Close()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	s.cmd = nil
}

// Env is the environment a pgsprint run needs to reach the server through
// endpoint (the server's own, or a proxy's), and nothing from the
// machine's AWS configuration.
func (s *S3Server) Env(endpoint string) []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_ENDPOINT_URL=" + endpoint,
		"AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// SetEnv sets Env(endpoint) for the rest of the test.
func (s *S3Server) SetEnv(t testing.TB, endpoint string) {
	for _, kv := range s.Env(endpoint) {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				t.Setenv(kv[:i], kv[i+1:])
				break
			}
		}
	}
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
}

// Client is an S3 client of the server, for a test to look at what is
// stored.
func (s *S3Server) Client() *awss3.Client {
	return awss3.New(awss3.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
	})
}

// Bucket creates a bucket named after the test and returns its name.
func (s *S3Server) Bucket(t testing.TB) string {
	t.Helper()
	name := "b" + strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
	if _, err := s.Client().CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("creating bucket %s: %v", name, err)
	}
	return name
}

// OpenUploads lists the bucket's multipart uploads not completed nor
// aborted, as "key uploadID".
func (s *S3Server) OpenUploads(t testing.TB, bucket string) []string {
	t.Helper()
	out, err := s.Client().ListMultipartUploads(context.Background(), &awss3.ListMultipartUploadsInput{Bucket: &bucket})
	if err != nil {
		t.Fatalf("listing uploads of %s: %v", bucket, err)
	}
	var open []string
	for _, u := range out.Uploads {
		open = append(open, aws.ToString(u.Key)+" "+aws.ToString(u.UploadId))
	}
	return open
}

// Objects lists the bucket's keys.
func (s *S3Server) Objects(t testing.TB, bucket string) []string {
	t.Helper()
	out, err := s.Client().ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{Bucket: &bucket})
	if err != nil {
		t.Fatalf("listing objects of %s: %v", bucket, err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}

// Path is where the server keeps bucket/key on disk, for a test to damage
// an object behind the server's back.
func (s *S3Server) Path(bucket, key string) string {
	return filepath.Join(s.dir, bucket, filepath.FromSlash(key))
}
