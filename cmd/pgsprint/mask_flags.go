package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/seal"
)

// maskFlags are dump's, clone's and mask check's masking flags
// (internal/mask). The secret is read from a file or the environment,
// never from the command line.
type maskFlags struct {
	rules      []string
	files      []string
	secretFile string
}

func (m *maskFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&m.rules, "mask", nil, "mask a column as it is read, 'schema.table.column=RULE': email, name, phone, text, number:MIN:MAX, dateshift:DAYS, null, const:VALUE, regex:/P/R/, hash[:N], keep (repeatable; see docs/guide/development-copies.md)")
	fs.StringArrayVar(&m.files, "mask-file", nil, "read masking rules from `FILE`, one 'schema.table.column = RULE' a line, # comments")
	fs.StringVar(&m.secretFile, "mask-secret-file", "", "key the masking with the secret on the first line of `FILE` (else $"+mask.SecretEnv+"); the same secret gives the same masked values")
}

// spec is what the flags ask for, the secret read; an error is a usage
// error. The secret's variable is removed from the environment once read,
// so that no child program (pg_dump) inherits it.
func (m *maskFlags) spec() (mask.Spec, error) {
	var spec mask.Spec
	for _, f := range m.files {
		rules, err := mask.ReadFile(f)
		if err != nil {
			return spec, usageError{err}
		}
		spec.Rules = append(spec.Rules, rules...)
	}
	for _, v := range m.rules {
		r, err := mask.Parse(v)
		if err != nil {
			return spec, usageError{err}
		}
		spec.Rules = append(spec.Rules, r)
	}
	secret, err := maskSecret(m.secretFile)
	if err != nil {
		return spec, err
	}
	if !spec.Active() {
		return spec, nil
	}
	if secret == "" {
		return spec, usageError{fmt.Errorf("--mask needs a secret: --mask-secret-file FILE or $%s (never on the command line)", mask.SecretEnv)}
	}
	if len(secret) < mask.MinSecret {
		// Its length only: a secret is never printed.
		return spec, usageError{fmt.Errorf("the mask secret is %d bytes: at least %d needed (a short secret can be guessed, and with it every masked value recomputed)", len(secret), mask.MinSecret)}
	}
	spec.Secret = []byte(secret)
	return spec, nil
}

// maskSecret is the mask secret, from the first line of file when it is
// not "", else from $PGSPRINT_MASK_SECRET ("" when neither): dump's,
// clone's, mask check's and compare's --mask-secret-file. The variable
// is removed from the environment once read, so that no child program
// (pg_dump) inherits it; an error is a usage error.
func maskSecret(file string) (string, error) {
	secret := os.Getenv(mask.SecretEnv)
	os.Unsetenv(mask.SecretEnv)
	if file != "" {
		var err error
		if secret, err = seal.ReadPassphraseFile(file); err != nil {
			return "", usageError{fmt.Errorf("--mask-secret-file: %w", err)}
		}
	}
	return secret, nil
}

// checkMaskWith refuses what masking cannot be combined with beyond
// refuseOneRun's: f is the selection as compatFlags.apply left it,
// statistics whether --statistics was given. Optimizer statistics hold
// original values of the masked columns (histograms, most common values),
// so a masked copy carries none, and a run that asks for them is refused
// rather than run without.
func checkMaskWith(f filter.Selection, statistics bool) error {
	switch {
	case f.StatisticsOnly:
		return usageError{fmt.Errorf("--mask does not take --statistics-only: optimizer statistics hold the original values of the masked columns, and a masked copy carries none")}
	case statistics:
		return usageError{fmt.Errorf("--mask does not take --statistics: optimizer statistics hold the original values of the masked columns, and a masked copy carries none (the target analyzes its masked rows)")}
	case f.SchemaOnly:
		return usageError{fmt.Errorf("--mask masks rows: it does not take --schema-only or --no-data")}
	}
	return nil
}
