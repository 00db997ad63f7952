package seal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"filippo.io/age"
)

// PassphraseEnv is the environment variable readers take a passphrase
// from when no --passphrase-file is given. dump never reads it: a
// variable left in the environment must not change what dump writes.
const PassphraseEnv = "PGSPRINT_PASSPHRASE"

// ParseRecipient parses one public key as age's -r does: age1... (X25519)
// or age1pq1... (hybrid post-quantum). The error never repeats the
// argument, which may be a secret key given by mistake.
func ParseRecipient(s string) (age.Recipient, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s, "\n#") {
		return nil, errors.New("not an age recipient (want age1...)")
	}
	rs, err := age.ParseRecipients(strings.NewReader(s))
	if err != nil {
		return nil, errors.New("not an age recipient (want age1...)")
	}
	return rs[0], nil
}

// fileError is a key file that cannot be read, named once: the caller
// says which flag named it ("--identity: keys.txt: no such file or
// directory", not "open keys.txt" inside "identity file").
func fileError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", path, pe.Err)
	}
	return err
}

// ReadRecipientsFile reads a recipients file as age's -R does: one public
// key per line, # comments and empty lines ignored.
func ReadRecipientsFile(path string) ([]age.Recipient, error) {
	return readKeyFile(path, "a recipients file", age.ParseRecipients)
}

// ReadIdentityFile reads an identity file as age's -i does (the output of
// age-keygen: AGE-SECRET-KEY-1... lines, # comments). Each identity comes
// back as a Named one, so that a reader can say which opened an archive.
func ReadIdentityFile(path string) ([]age.Identity, error) {
	ids, err := readKeyFile(path, "an identity file", age.ParseIdentities)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		ids[i] = Named{Identity: id, Name: "identity file " + path + " (" + Describe(id) + ")"}
	}
	return ids, nil
}

// readKeyFile reads path and parses it with age's parse for its kind of
// key file. age's messages never quote key material, so the error may
// carry them.
func readKeyFile[T any](path, kind string, parse func(io.Reader) ([]T, error)) ([]T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fileError(path, err)
	}
	keys, err := parse(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: not %s: %v", path, kind, err)
	}
	return keys, nil
}

// Named is an identity with the words that say where it came from, so
// that list and verify can tell which of the reader's identities opened
// an archive (the archive itself no longer names its recipients).
type Named struct {
	age.Identity
	Name string
}

// Describe names an identity without its secret: a Named one by its
// name, a key by its public key, a passphrase as such.
func Describe(id age.Identity) string {
	switch id := id.(type) {
	case Named:
		return id.Name
	case *age.X25519Identity:
		return id.Recipient().String()
	case *age.HybridIdentity:
		return id.Recipient().String()
	case *age.ScryptIdentity:
		return "the passphrase"
	}
	return fmt.Sprintf("a %T identity", id)
}

// ReadPassphraseFile returns the first line of path, without its line
// end. An empty passphrase is refused.
func ReadPassphraseFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fileError(path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	var line string
	if sc.Scan() {
		line = strings.TrimSuffix(sc.Text(), "\r")
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) { // not bufio's "token too long"
			return "", fmt.Errorf("%s: the first line is longer than 64 KiB, so not a passphrase: give the file whose first line is the passphrase", path)
		}
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if line == "" {
		return "", fmt.Errorf("%s: the first line is empty: the passphrase is the first line", path)
	}
	return line, nil
}

// PassphraseRecipient wraps a data key with a passphrase through scrypt,
// as `age -p` does; workFactor 0 keeps age's default (2^18).
func PassphraseRecipient(pass string, workFactor int) (age.Recipient, error) {
	r, err := age.NewScryptRecipient(pass)
	if err != nil {
		return nil, fmt.Errorf("passphrase: %v", err)
	}
	if workFactor > 0 {
		r.SetWorkFactor(workFactor)
	}
	return r, nil
}

// PassphraseIdentity opens a data key wrapped by PassphraseRecipient.
func PassphraseIdentity(pass string) (age.Identity, error) {
	id, err := age.NewScryptIdentity(pass)
	if err != nil {
		return nil, fmt.Errorf("passphrase: %v", err)
	}
	return id, nil
}
