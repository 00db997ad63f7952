package seal

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
)

func newIdentity(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestEveryRecipientUnwraps(t *testing.T) {
	a, b, other := newIdentity(t), newIdentity(t), newIdentity(t)
	k, env, err := New(a.Recipient(), b.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	sealed := k.Seal(nil, PurposeFrame, 3, 4, []byte("header"), []byte("rows"))
	for _, id := range []age.Identity{a, b} {
		k2, err := Unwrap(env, other, id) // the first identity does not match
		if err != nil {
			t.Fatal(err)
		}
		if k2.OpenedBy() != id.(*age.X25519Identity).Recipient().String() {
			t.Fatalf("opened by %q, want %s's public key", k2.OpenedBy(), id)
		}
		plain, err := k2.Open(nil, PurposeFrame, 3, 4, []byte("header"), sealed)
		if err != nil || string(plain) != "rows" {
			t.Fatalf("Open: %q, %v", plain, err)
		}
	}
	_, err = Unwrap(env, other)
	var kerr *KeyError
	if !errors.As(err, &kerr) || !kerr.Given || len(kerr.Recipients) != 0 || err.Error() != "archive is encrypted; no matching identity (none of the given identities opens it)" {
		t.Fatalf("other identity: %v", err)
	}
	for _, id := range []*age.X25519Identity{a, b} {
		if bytes.Contains(env, []byte(id.String())) {
			t.Fatal("envelope holds a secret key")
		}
		// As age's own format, the envelope does not say who can read it.
		if bytes.Contains(env, []byte(id.Recipient().String())) {
			t.Fatal("envelope names a recipient's public key")
		}
	}
}

// TestOlderEnvelopeNamesRecipients reads an envelope as pgsprint wrote
// them before it stopped recording recipients: still opened, and a
// reader without the key is told the recipients it lists.
func TestOlderEnvelopeNamesRecipients(t *testing.T) {
	a, other := newIdentity(t), newIdentity(t)
	_, env, err := New(a.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	e["recipients"] = []string{a.Recipient().String()}
	old, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Unwrap(old, a); err != nil {
		t.Fatal(err)
	}
	_, err = Unwrap(old, other)
	if want := "archive is encrypted to " + a.Recipient().String() + "; no matching identity (none of the given identities opens it)"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	info, err := Inspect(old)
	if err != nil || info.String() != "encrypted to "+a.Recipient().String() {
		t.Fatalf("Inspect: %v, %v", info, err)
	}
}

// TestNoncesDiffer seals the same plaintext at different places: the
// ciphertexts must differ (a repeated nonce would repeat the keystream),
// and each opens only at its own place.
func TestNoncesDiffer(t *testing.T) {
	k, _, err := New(newIdentity(t).Recipient())
	if err != nil {
		t.Fatal(err)
	}
	type place struct {
		p           Purpose
		stream, seq uint32
	}
	places := []place{{PurposeFrame, 1, 0}, {PurposeFrame, 1, 1}, {PurposeFrame, 2, 0}, {PurposeManifest, 0, 0}, {PurposeFooter, 0, 0}}
	seen := map[string]place{}
	for _, pl := range places {
		c := k.Seal(nil, pl.p, pl.stream, pl.seq, nil, []byte("same plaintext"))
		if prev, ok := seen[string(c)]; ok {
			t.Fatalf("%+v and %+v sealed alike", prev, pl)
		}
		seen[string(c)] = pl
		for _, other := range places {
			_, err := k.Open(nil, other.p, other.stream, other.seq, nil, c)
			if (other == pl) != (err == nil) {
				t.Fatalf("sealed at %+v, opened at %+v: %v", pl, other, err)
			}
		}
	}
	// Associated data and archive id are bound too.
	c := k.Seal(nil, PurposeFrame, 1, 0, []byte("hdr"), []byte("x"))
	if _, err := k.Open(nil, PurposeFrame, 1, 0, []byte("hdR"), c); !errors.Is(err, ErrDamaged) {
		t.Fatalf("changed associated data: %v", err)
	}
	k2 := *k
	k2.id[0] ^= 1
	if _, err := k2.Open(nil, PurposeFrame, 1, 0, []byte("hdr"), c); !errors.Is(err, ErrDamaged) {
		t.Fatalf("other archive id: %v", err)
	}
}

func TestPassphrase(t *testing.T) {
	r, err := PassphraseRecipient("s3cret words", 10)
	if err != nil {
		t.Fatal(err)
	}
	_, env, err := New(r)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := PassphraseIdentity("s3cret words")
	if _, err := Unwrap(env, good); err != nil {
		t.Fatal(err)
	}
	bad, _ := PassphraseIdentity("other words")
	_, err = Unwrap(env, bad)
	if !errors.Is(err, ErrNoKey) || strings.Contains(err.Error(), "words") {
		t.Fatalf("wrong passphrase: %v", err)
	}
	if _, err := Unwrap(env); err == nil || !strings.Contains(err.Error(), "none given") {
		t.Fatalf("no passphrase: %v", err)
	}
	if _, _, err := New(r, newIdentity(t).Recipient()); err == nil {
		t.Fatal("passphrase combined with a recipient accepted")
	}
}

// TestKeyErrorNamesWhatWasGiven: a key of the wrong kind is named as
// such (an identity for a passphrase archive, a passphrase for one
// encrypted to keys), not as a passphrase or identity that does not match;
// the command line's Named wrappers included.
func TestKeyErrorNamesWhatWasGiven(t *testing.T) {
	r, err := PassphraseRecipient("s3cret words", 10)
	if err != nil {
		t.Fatal(err)
	}
	_, byPass, err := New(r)
	if err != nil {
		t.Fatal(err)
	}
	_, byKey, err := New(newIdentity(t).Recipient())
	if err != nil {
		t.Fatal(err)
	}
	wrong, _ := PassphraseIdentity("other words")
	for _, tc := range []struct {
		name string
		env  []byte
		ids  []age.Identity
		want string
	}{
		{"wrong passphrase", byPass, []age.Identity{Named{Identity: wrong, Name: "the passphrase"}}, "archive is encrypted with a passphrase; the passphrase does not match"},
		{"identity for a passphrase", byPass, []age.Identity{Named{Identity: newIdentity(t), Name: "k"}},
			"archive is encrypted with a passphrase, not to an age identity: give its passphrase (--passphrase-file FILE or PGSPRINT_PASSPHRASE) instead of --identity"},
		{"passphrase for keys", byKey, []age.Identity{Named{Identity: wrong, Name: "the passphrase"}}, "archive is encrypted, not with a passphrase: give a matching identity (--identity FILE)"},
		{"other identity", byKey, []age.Identity{newIdentity(t)}, "archive is encrypted; no matching identity (none of the given identities opens it)"},
	} {
		if _, err := Unwrap(tc.env, tc.ids...); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestEnvelopeRefused(t *testing.T) {
	id := newIdentity(t)
	_, env, err := New(id.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"unknown cipher", Cipher, "ROT-13", `encrypted with "ROT-13"`},
		{"bad id", `"archive_id":"`, `"archive_id":"zz`, "bad archive id"},
		{"not json", `{`, `[`, "encryption envelope"},
	} {
		e := bytes.Replace(env, []byte(tc.from), []byte(tc.to), 1)
		if _, err := Unwrap(e, id); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	id := newIdentity(t)
	idFile := filepath.Join(dir, "key.txt")
	os.WriteFile(idFile, []byte("# created: now\n# public key: "+id.Recipient().String()+"\n"+id.String()+"\n"), 0o600)
	ids, err := ReadIdentityFile(idFile)
	if err != nil || len(ids) != 1 {
		t.Fatalf("identity file: %v", err)
	}
	// A key opened with it says which file and which public key.
	_, env, err := New(id.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	k2, err := Unwrap(env, newIdentity(t), ids[0])
	if want := "identity file " + idFile + " (" + id.Recipient().String() + ")"; err != nil || k2.OpenedBy() != want {
		t.Fatalf("opened by %q (%v), want %q", k2.OpenedBy(), err, want)
	}
	recFile := filepath.Join(dir, "recipients.txt")
	os.WriteFile(recFile, []byte("# backup keys\n"+id.Recipient().String()+"\n\n"+newIdentity(t).Recipient().String()+"\n"), 0o644)
	rs, err := ReadRecipientsFile(recFile)
	if err != nil || len(rs) != 2 {
		t.Fatalf("recipients file: %d, %v", len(rs), err)
	}
	if _, err := ParseRecipient(id.Recipient().String()); err != nil {
		t.Fatal(err)
	}
	// A secret key given as a recipient is refused without being echoed.
	_, err = ParseRecipient(id.String())
	if err == nil || strings.Contains(err.Error(), id.String()) {
		t.Fatalf("secret key as recipient: %v", err)
	}
	_, err = ReadRecipientsFile(idFile)
	if err == nil || strings.Contains(err.Error(), id.String()) {
		t.Fatalf("identity file as recipients file: %v", err)
	}
	pass := filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("two words\r\nignored\n"), 0o600)
	if p, err := ReadPassphraseFile(pass); err != nil || p != "two words" {
		t.Fatalf("passphrase file: %q, %v", p, err)
	}
	os.WriteFile(pass, []byte("\n"), 0o600)
	if _, err := ReadPassphraseFile(pass); err == nil {
		t.Fatal("empty passphrase accepted")
	}
}

// TestPassphraseFileTooLong: a file whose first line no passphrase has
// (an archive given by mistake) is named, with what to give instead, not
// bufio's "token too long".
func TestPassphraseFileTooLong(t *testing.T) {
	path := filepath.Join(t.TempDir(), "archive.pgs")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 70<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadPassphraseFile(path)
	if want := path + ": the first line is longer than 64 KiB, so not a passphrase: give the file whose first line is the passphrase"; err == nil || err.Error() != want {
		t.Errorf("%v, want %s", err, want)
	}
}
