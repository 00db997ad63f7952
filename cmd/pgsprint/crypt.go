package main

import (
	"fmt"
	"os"

	"filippo.io/age"
	"github.com/spf13/pflag"

	"github.com/pgsprint/pgsprint/internal/seal"
)

// encryptFlags are dump's, after age's -r, -R and -p: whom the archive is
// encrypted to. Keys are read from arguments and files, never passed on.
type encryptFlags struct {
	to       []string // --encrypt-to age1...
	toFiles  []string // --encrypt-to-file FILE
	passFile string   // --passphrase-file FILE
}

func (e *encryptFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&e.to, "encrypt-to", nil, "encrypt the archive to this age public key `RECIPIENT` (age1...; repeatable: each recipient's identity opens it)")
	fs.StringArrayVar(&e.toFiles, "encrypt-to-file", nil, "encrypt the archive to every public key in this age recipients `FILE` (one per line, # comments; repeatable)")
	fs.StringVar(&e.passFile, "passphrase-file", "", "encrypt the archive with the passphrase on the first line of `FILE` (scrypt, as age -p; not with --encrypt-to)")
}

// recipients parses the flags; none given means a clear archive. dump
// never reads $PGSPRINT_PASSPHRASE, but removes it, so that pg_dump does
// not inherit a passphrase meant for readers.
func (e *encryptFlags) recipients() ([]age.Recipient, error) {
	os.Unsetenv(seal.PassphraseEnv)
	var rs []age.Recipient
	for _, s := range e.to {
		r, err := seal.ParseRecipient(s)
		if err != nil {
			return nil, usageError{fmt.Errorf("--encrypt-to: %v", err)}
		}
		rs = append(rs, r)
	}
	for _, path := range e.toFiles {
		more, err := seal.ReadRecipientsFile(path)
		if err != nil {
			return nil, fmt.Errorf("--encrypt-to-file: %w", err)
		}
		rs = append(rs, more...)
	}
	if e.passFile != "" {
		if len(rs) > 0 {
			return nil, usageError{fmt.Errorf("--passphrase-file does not combine with --encrypt-to/--encrypt-to-file (age allows a passphrase only alone)")}
		}
		pass, err := seal.ReadPassphraseFile(e.passFile)
		if err != nil {
			return nil, fmt.Errorf("--passphrase-file: %w", err)
		}
		r, err := seal.PassphraseRecipient(pass, 0)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// keyFlags are the readers' (restore, list, verify), after age's -i: what
// opens an encrypted archive. A clear archive ignores them.
type keyFlags struct {
	identityFiles []string // --identity FILE
	passFile      string   // --passphrase-file FILE
}

func (k *keyFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&k.identityFiles, "identity", nil, "open an encrypted archive with the age identities in `FILE` (age-keygen's output; repeatable)")
	fs.StringVar(&k.passFile, "passphrase-file", "", "open an archive encrypted with a passphrase with the one on the first line of `FILE` (else $"+seal.PassphraseEnv+")")
}

// identities reads the identity files and the passphrase, from
// --passphrase-file or else the environment. The variable is removed
// from the environment once read, so that no child program inherits it.
func (k *keyFlags) identities() ([]age.Identity, error) {
	var ids []age.Identity
	for _, path := range k.identityFiles {
		more, err := seal.ReadIdentityFile(path)
		if err != nil {
			return nil, fmt.Errorf("--identity: %w", err)
		}
		ids = append(ids, more...)
	}
	pass := os.Getenv(seal.PassphraseEnv)
	os.Unsetenv(seal.PassphraseEnv)
	from := "$" + seal.PassphraseEnv
	if k.passFile != "" {
		var err error
		if pass, err = seal.ReadPassphraseFile(k.passFile); err != nil {
			return nil, fmt.Errorf("--passphrase-file: %w", err)
		}
		from = "passphrase file " + k.passFile
	}
	if pass != "" {
		id, err := seal.PassphraseIdentity(pass)
		if err != nil {
			return nil, err
		}
		ids = append(ids, seal.Named{Identity: id, Name: "the passphrase (" + from + ")"})
	}
	return ids, nil
}
