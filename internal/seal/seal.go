// Package seal encrypts archives. Each archive gets a random data key,
// wrapped for its readers with age (filippo.io/age: X25519 or hybrid
// public keys, or a passphrase through scrypt), and every sealed piece of
// the archive (the manifest, each frame's payload, the footer) is
// encrypted and authenticated with AES-256-GCM under that key. The nonce
// is derived from the piece's place in the archive (what it is, its
// stream and sequence number), never stored, so each frame can be opened
// on its own: parallel restore, pipe restore and ranged reads keep
// working. docs/FORMAT.md, "Encryption", specifies the construction.
package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"filippo.io/age"
)

// Cipher names the AEAD in the envelope, so that a reader refuses one it
// does not implement instead of guessing.
const Cipher = "AES-256-GCM"

// Overhead is what sealing adds to a piece: the 16-byte GCM tag.
const Overhead = 16

// IDSize is the length of the archive id bound into every piece's
// associated data.
const IDSize = 16

const keySize = 32

// MaxEnvelopeSize bounds the clear envelope a reader parses (one wrapped
// key per recipient: a few hundred bytes each).
const MaxEnvelopeSize = 1 << 20

// Purpose says what a sealed piece is; it is the first word of the nonce,
// so that no two pieces of an archive share a nonce.
type Purpose uint32

// Purposes of sealed pieces. The numbers are part of the format.
const (
	PurposeManifest Purpose = 1
	PurposeFrame    Purpose = 2
	PurposeFooter   Purpose = 3
)

// Key is one archive's data key, ready to seal and open its pieces. It
// never leaves the process: only its wrapped form is written.
type Key struct {
	aead     cipher.AEAD
	id       [IDSize]byte
	openedBy string // which identity unwrapped it, for messages; empty when written
}

// envelope is the clear part of an encrypted archive's header: what a
// reader needs before it has the key, and nothing more.
type envelope struct {
	Cipher    string `json:"cipher"`
	ArchiveID string `json:"archive_id"` // hex
	// Recipients are the public keys the data key is wrapped to. Only
	// archives written before pgsprint stopped recording them have it:
	// whoever holds the file would learn who can read it (age's own
	// format names no recipient). Read, never written.
	Recipients []string `json:"recipients,omitempty"`
	Passphrase bool     `json:"passphrase,omitempty"`
	// WrappedKey is an age file (binary format) whose content is the
	// 32-byte data key: `age -d -i IDENTITY` of it prints the key.
	WrappedKey []byte `json:"wrapped_key"`
}

// New makes a random data key and archive id and wraps the key to every
// recipient. It returns the key and the envelope to write in the clear.
// A passphrase (an *age.ScryptRecipient) must be the only recipient, as
// age requires.
func New(recipients ...age.Recipient) (*Key, []byte, error) {
	if len(recipients) == 0 {
		return nil, nil, errors.New("encrypt: no recipients")
	}
	env := envelope{Cipher: Cipher}
	for _, r := range recipients {
		if _, ok := r.(*age.ScryptRecipient); ok {
			if len(recipients) > 1 {
				return nil, nil, errors.New("encrypt: a passphrase cannot be combined with recipients (age allows a passphrase only alone)")
			}
			env.Passphrase = true
		}
	}
	dataKey := make([]byte, keySize)
	k := &Key{}
	if _, err := rand.Read(dataKey); err != nil {
		return nil, nil, fmt.Errorf("encrypt: %w", err)
	}
	if _, err := rand.Read(k.id[:]); err != nil {
		return nil, nil, fmt.Errorf("encrypt: %w", err)
	}
	var wrapped bytes.Buffer
	w, err := age.Encrypt(&wrapped, recipients...)
	if err != nil {
		return nil, nil, fmt.Errorf("encrypt: wrapping the data key: %w", err)
	}
	if _, err := w.Write(dataKey); err != nil {
		return nil, nil, fmt.Errorf("encrypt: wrapping the data key: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, nil, fmt.Errorf("encrypt: wrapping the data key: %w", err)
	}
	if k.aead, err = newAEAD(dataKey); err != nil {
		return nil, nil, err
	}
	env.ArchiveID = hex.EncodeToString(k.id[:])
	env.WrappedKey = wrapped.Bytes()
	b, err := json.Marshal(&env)
	if err != nil {
		return nil, nil, fmt.Errorf("encrypt: %w", err)
	}
	return k, b, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	return aead, nil
}

// ErrNoKey matches (errors.Is) a KeyError: the archive is encrypted and
// no identity or passphrase given opens it.
var ErrNoKey = errors.New("no key for the encrypted archive")

// ErrDamaged matches every failure of a sealed piece to open, and every
// malformed envelope: the bytes were changed, by accident or not.
var ErrDamaged = errors.New("damaged")

// KeyError says that no key given opens an archive (no matching
// identity, the wrong passphrase, or none). It names the recipients only
// for an older archive whose envelope lists them.
type KeyError struct {
	Recipients []string // empty for archives that do not list them
	Passphrase bool
	Given      bool // identities were given, and none matched
	// GivenPassphrase and GivenIdentity say which kinds were given: a
	// passphrase archive opened with only --identity files is told so,
	// not that its passphrase does not match.
	GivenPassphrase, GivenIdentity bool
}

// Error is one line, never naming a key the archive does not already
// name in clear.
func (e *KeyError) Error() string {
	if e.Passphrase {
		switch {
		case e.GivenPassphrase:
			return "archive is encrypted with a passphrase; the passphrase does not match"
		case e.GivenIdentity:
			return "archive is encrypted with a passphrase, not to an age identity: give its passphrase (--passphrase-file FILE or PGSPRINT_PASSPHRASE) instead of --identity"
		}
		return "archive is encrypted with a passphrase; none given (--passphrase-file FILE or PGSPRINT_PASSPHRASE)"
	}
	what := "archive is encrypted"
	if len(e.Recipients) > 0 {
		what += " to " + strings.Join(e.Recipients, ", ")
	}
	if e.Given && !e.GivenIdentity {
		return what + ", not with a passphrase: give a matching identity (--identity FILE)"
	}
	if e.Given {
		return what + "; no matching identity (none of the given identities opens it)"
	}
	return what + "; no identity given (--identity FILE)"
}

// Is makes errors.Is(err, ErrNoKey) true.
func (e *KeyError) Is(target error) bool { return target == ErrNoKey }

// Info describes an envelope without opening it: for messages and for
// the structural check of an archive whose key the reader lacks.
type Info struct {
	Cipher     string
	Recipients []string
	Passphrase bool
}

// String says how the archive is encrypted, for a message: "encrypted
// with a passphrase", "encrypted" (an envelope that names no recipient,
// as pgsprint writes them), or, for an older archive that lists them,
// "encrypted to age1...".
func (i Info) String() string {
	switch {
	case i.Passphrase:
		return "encrypted with a passphrase"
	case len(i.Recipients) > 0:
		return "encrypted to " + strings.Join(i.Recipients, ", ")
	}
	return "encrypted"
}

// Inspect parses an envelope and checks it is one this package can open,
// without any key.
func Inspect(envBytes []byte) (Info, error) {
	env, err := parseEnvelope(envBytes)
	if err != nil {
		return Info{}, err
	}
	return Info{Cipher: env.Cipher, Recipients: env.Recipients, Passphrase: env.Passphrase}, nil
}

func parseEnvelope(b []byte) (*envelope, error) {
	if len(b) > MaxEnvelopeSize {
		return nil, fmt.Errorf("encryption envelope of %d bytes exceeds the %d byte limit: %w", len(b), MaxEnvelopeSize, ErrDamaged)
	}
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, fmt.Errorf("encryption envelope: %v: %w", err, ErrDamaged)
	}
	if env.Cipher != Cipher {
		return nil, fmt.Errorf("archive is encrypted with %q, which this pgsprint does not implement (it knows %s)", env.Cipher, Cipher)
	}
	id, err := hex.DecodeString(env.ArchiveID)
	if err != nil || len(id) != IDSize {
		return nil, fmt.Errorf("encryption envelope: bad archive id: %w", ErrDamaged)
	}
	if len(env.WrappedKey) == 0 {
		return nil, fmt.Errorf("encryption envelope: no wrapped key: %w", ErrDamaged)
	}
	return &env, nil
}

// Unwrap opens the envelope with the first identity that matches, tried
// one at a time so that the key can say which one opened it (OpenedBy).
// With none matching (or none given) it returns a *KeyError; a wrapped
// key that age finds damaged matches ErrDamaged.
func Unwrap(envBytes []byte, identities ...age.Identity) (*Key, error) {
	env, err := parseEnvelope(envBytes)
	if err != nil {
		return nil, err
	}
	var r io.Reader
	var by age.Identity
	for _, id := range identities {
		r, err = age.Decrypt(bytes.NewReader(env.WrappedKey), id)
		var noMatch *age.NoIdentityMatchError
		if errors.As(err, &noMatch) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("wrapped data key: %v: %w", err, ErrDamaged)
		}
		by = id
		break
	}
	if by == nil {
		kerr := &KeyError{Recipients: env.Recipients, Passphrase: env.Passphrase, Given: len(identities) > 0}
		for _, id := range identities {
			if n, ok := id.(Named); ok {
				id = n.Identity
			}
			if _, ok := id.(*age.ScryptIdentity); ok {
				kerr.GivenPassphrase = true
			} else {
				kerr.GivenIdentity = true
			}
		}
		return nil, kerr
	}
	dataKey, err := io.ReadAll(io.LimitReader(r, keySize+1))
	if err != nil {
		return nil, fmt.Errorf("wrapped data key: %v: %w", err, ErrDamaged)
	}
	if len(dataKey) != keySize {
		return nil, fmt.Errorf("wrapped data key holds %d bytes, not %d: %w", len(dataKey), keySize, ErrDamaged)
	}
	k := &Key{openedBy: Describe(by)}
	copy(k.id[:], mustHex(env.ArchiveID))
	if k.aead, err = newAEAD(dataKey); err != nil {
		return nil, err
	}
	return k, nil
}

func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s) // parseEnvelope checked it
	return b
}

// nonce is the piece's position: purpose, stream, seq. Unique within an
// archive because each stream's seq numbers are, and the key is unique
// to the archive.
func nonce(p Purpose, stream, seq uint32) [12]byte {
	var n [12]byte
	binary.BigEndian.PutUint32(n[0:], uint32(p))
	binary.BigEndian.PutUint32(n[4:], stream)
	binary.BigEndian.PutUint32(n[8:], seq)
	return n
}

// additional is the associated data: the archive id, then the caller's
// bytes (the frame header, or the clear header before the manifest).
func (k *Key) additional(ad []byte) []byte {
	b := make([]byte, 0, IDSize+len(ad))
	return append(append(b, k.id[:]...), ad...)
}

// Seal appends to dst the encryption of plain, Overhead bytes longer,
// authenticating ad with it.
func (k *Key) Seal(dst []byte, p Purpose, stream, seq uint32, ad, plain []byte) []byte {
	n := nonce(p, stream, seq)
	return k.aead.Seal(dst, n[:], plain, k.additional(ad))
}

// Open appends to dst the plaintext of sealed, which must have been
// sealed with the same purpose, stream, seq and ad under this archive's
// key; anything else fails with an error matching ErrDamaged. dst and
// sealed may be the same buffer at offset 0 (sealed[:0]).
func (k *Key) Open(dst []byte, p Purpose, stream, seq uint32, ad, sealed []byte) ([]byte, error) {
	n := nonce(p, stream, seq)
	out, err := k.aead.Open(dst, n[:], sealed, k.additional(ad))
	if err != nil {
		return nil, ErrDamaged
	}
	return out, nil
}

// OpenedBy says which of the reader's identities opened the archive
// ("identity file key.txt (age1...)", "the passphrase"), for list and
// verify; empty for a key made to write.
func (k *Key) OpenedBy() string { return k.openedBy }
