package benchkit

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pgsprint/pgsprint/internal/store/remotetest"
)

// S3Bucket is the bucket every s3:// row writes to.
const S3Bucket = "bench"

// S3Server is a versitygw gateway on 127.0.0.1 over a directory of the
// work dir: the object store of the "pgsprint s3" rows, on the same
// machine as the file rows' disk, so that the two compare the medium and
// not a network.
type S3Server struct {
	endpoint, dir string
	cmd           *exec.Cmd
}

// StartS3 starts the server and creates the bucket; Close stops it.
func StartS3(ctx context.Context, workDir string) (*S3Server, error) {
	bin, err := remotetest.VersitygwBin()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	s := &S3Server{endpoint: "http://" + addr, dir: filepath.Join(workDir, "s3")}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, "--quiet", "--port", addr, "posix", s.dir)
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+remotetest.AccessKey, "ROOT_SECRET_ACCESS_KEY="+remotetest.SecretKey)
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, fmt.Errorf("versitygw did not listen on %s", addr)
		}
	}
	cl := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(remotetest.AccessKey, remotetest.SecretKey, "")})
	if _, err := cl.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(S3Bucket)}); err != nil {
		s.Close()
		return nil, fmt.Errorf("creating the bucket: %w", err)
	}
	return s, nil
}

// Env is what pgsprint needs to reach the server, and nothing of the
// machine's own AWS configuration.
func (s *S3Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + remotetest.AccessKey, "AWS_SECRET_ACCESS_KEY=" + remotetest.SecretKey,
		"AWS_ENDPOINT_URL=" + s.endpoint, "AWS_REGION=us-east-1", "AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull, "AWS_EC2_METADATA_DISABLED=true"}
}

// Location is the s3:// location of a backup the file rows would write
// at path, and where the server keeps its bytes.
func (s *S3Server) Location(path string) (loc, onDisk string) {
	return "s3://" + S3Bucket + "/" + filepath.Base(path), filepath.Join(s.dir, S3Bucket, filepath.Base(path))
}

// Close stops the server; the objects stay in its directory.
func (s *S3Server) Close() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}
